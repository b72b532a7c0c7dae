package org.handled.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One {@code handled serve --ephemeral} process on 127.0.0.1 with free ports.
 *
 * <pre>
 * handled serve --ephemeral --listen 127.0.0.1 --port P --http-port H --prefix TEST --import FILE
 *     --admin-credentials WORKDIR/admin-TEST.json
 * </pre>
 *
 * Started with {@link #start}, which waits (at most {@link #READY_TIMEOUT_MS}) for the line
 * {@code ready} on the server's stdout. stdout and stderr go to log files in the server's work
 * directory under {@code target/interop/}.
 */
public final class HandledServer implements AutoCloseable {
    public static final long READY_TIMEOUT_MS = 10_000;
    public static final InetAddress LOOPBACK = loopback();

    private static InetAddress loopback() {
        try {
            return InetAddress.getByAddress("127.0.0.1", new byte[] {127, 0, 0, 1});
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    public final Path binary;
    public final Path workDir;
    public final Path stdoutLog;
    public final Path stderrLog;
    public final int port;
    public final int httpPort;
    /** The admin credentials (JSON) the server wrote for TEST/ADMIN at start-up. */
    public final Path adminCredentials;
    /**
     * Remote-admin mode: the native TCP address of the server holding the admin handle (the
     * "global registry"); null when the admin handle lives on this server.
     */
    public volatile InetSocketAddress adminHome;
    private final Process process;
    /** Cluster mode: the other nodes and the balancers, stopped with this server. */
    private final List<Process> extras = new ArrayList<>();
    private final Thread shutdownHook;

    HandledServer(Path binary, Path workDir, int port, int httpPort, Process process,
            Path stdoutLog, Path stderrLog, Path adminCredentials) {
        this.binary = binary;
        this.adminCredentials = adminCredentials;
        this.workDir = workDir;
        this.port = port;
        this.httpPort = httpPort;
        this.process = process;
        this.stdoutLog = stdoutLog;
        this.stderrLog = stderrLog;
        this.shutdownHook = new Thread(() -> {
            process.destroyForcibly();
            extras.forEach(Process::destroyForcibly);
        }, "kill-handled-" + port);
        Runtime.getRuntime().addShutdownHook(shutdownHook);
    }

    /**
     * Path of the server binary: system property {@code handled.bin}, default
     * $CARGO_TARGET_DIR/release/handled, else ../../target/release/handled.
     */
    public static Path binaryPath() {
        String prop = System.getProperty("handled.bin");
        String target = System.getenv("CARGO_TARGET_DIR");
        Path p = prop != null && !prop.isBlank() ? Paths.get(prop)
                : Paths.get(target == null || target.isBlank() ? "../../target" : target, "release", "handled");
        return p.toAbsolutePath().normalize();
    }

    /** Work directory root for servers and client config dirs (target/interop by default). */
    public static Path workRoot() throws IOException {
        String prop = System.getProperty("interop.workDir");
        Path p = Paths.get(prop == null || prop.isBlank() ? "target/interop" : prop).toAbsolutePath();
        Files.createDirectories(p);
        return p;
    }

    /**
     * Nodes per server when {@code HANDLED_TEST_CLUSTER_NODES} (≥ 2) and {@code HANDLED_TEST_CASSANDRA}
     * are set: the suite then runs through a balancer in front of that many stateless nodes.
     */
    static int clusterNodes() {
        String n = System.getenv("HANDLED_TEST_CLUSTER_NODES");
        String cassandra = System.getenv("HANDLED_TEST_CASSANDRA");
        if (n == null || n.isBlank() || cassandra == null || cassandra.isBlank()) {
            return 1;
        }
        return Math.max(1, Integer.parseInt(n.trim()));
    }

    /** Starts a server importing {@code importFile}; {@code name} labels the work dir and logs. */
    public static HandledServer start(String name, Path workDir, Path importFile) throws Exception {
        if (clusterNodes() > 1) {
            return ClusterLauncher.start(workDir, importFile, clusterNodes());
        }
        if (RemoteAdminLauncher.enabled()) {
            return RemoteAdminLauncher.start(workDir, importFile);
        }
        Path bin = binaryPath();
        if (!Files.isRegularFile(bin) || !Files.isExecutable(bin)) {
            throw new IllegalStateException("handled binary not found or not executable: " + bin
                    + " (build it with `cargo build --release`, or pass -Dhandled.bin=/path/to/handled)");
        }
        Exception last = null;
        // Retry only when the process exits early (e.g. a port grabbed by someone else in between).
        for (int attempt = 1; attempt <= 3; attempt++) {
            int[] ports = freePorts();
            Path out = workDir.resolve("handled-" + attempt + ".stdout.log");
            Path err = workDir.resolve("handled-" + attempt + ".stderr.log");
            Path creds = workDir.resolve("admin-" + Fixtures.PREFIX + "-" + attempt + ".json");
            // With a Cassandra node at $HANDLED_TEST_CASSANDRA (tests/cassandra/run.sh) every
            // server runs on the Cassandra store, in a keyspace of its own.
            String cassandra = System.getenv("HANDLED_TEST_CASSANDRA");
            boolean onCassandra = cassandra != null && !cassandra.isEmpty();
            // With $HANDLED_TEST_DATA_FROM (tests/replication/migration.sh) every server starts on
            // a copy of that data directory: the suite then runs on a store made by replication.
            String dataFrom = System.getenv("HANDLED_TEST_DATA_FROM");
            boolean fromCopy = !onCassandra && dataFrom != null && !dataFrom.isEmpty();
            if (fromCopy) {
                copyTree(Paths.get(dataFrom), workDir.resolve("data-" + attempt));
                // A store made by replication already holds TEST/ADMIN (the server then writes no
                // credentials): $HANDLED_TEST_CREDENTIALS_FROM names the file that matches it.
                String credsFrom = System.getenv("HANDLED_TEST_CREDENTIALS_FROM");
                if (credsFrom != null && !credsFrom.isEmpty()) {
                    Files.copy(Paths.get(credsFrom), creds, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                }
            }
            List<String> cmd = List.of(bin.toString(), "serve",
                    onCassandra || fromCopy ? "--data-dir=" + workDir.resolve("data-" + attempt) : "--ephemeral",
                    "--admin-credentials", creds.toString(),
                    "--listen", "127.0.0.1",
                    "--port", Integer.toString(ports[0]),
                    "--http-port", Integer.toString(ports[1]),
                    "--prefix", Fixtures.PREFIX,
                    "--import", importFile.toString());
            Files.writeString(workDir.resolve("handled-" + attempt + ".cmdline"), String.join(" ", cmd) + "\n");
            ProcessBuilder pb = new ProcessBuilder(cmd)
                    .directory(workDir.toFile())
                    .redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.PIPE);
            pb.environment().putIfAbsent("RUST_BACKTRACE", "1");
            if (onCassandra) {
                pb.environment().put("HANDLED_STORE", "cassandra");
                pb.environment().put("HANDLED_CASSANDRA_CONTACT_POINTS", cassandra);
                pb.environment().put("HANDLED_CASSANDRA_REPLICATION", "1");
                pb.environment().put("HANDLED_CASSANDRA_KEYSPACE",
                        "java_" + java.util.UUID.randomUUID().toString().replace("-", "").substring(0, 16));
            }
            Process p = pb.start();
            p.getOutputStream().close();
            CompletableFuture<Void> ready = new CompletableFuture<>();
            Thread pump = new Thread(() -> pumpStdout(p, out, ready), "handled-stdout-" + ports[0]);
            pump.setDaemon(true);
            pump.start();
            try {
                ready.get(READY_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                return new HandledServer(bin, workDir, ports[0], ports[1], p, out, err, creds);
            } catch (TimeoutException e) {
                kill(p);
                throw new IllegalStateException("handled did not print 'ready' within "
                        + READY_TIMEOUT_MS + " ms: " + String.join(" ", cmd)
                        + "\n--- stderr tail (" + err + ") ---\n" + tail(err)
                        + "\n--- stdout tail ---\n" + tail(out));
            } catch (java.util.concurrent.ExecutionException e) {
                p.waitFor(2, TimeUnit.SECONDS);
                kill(p);
                String exit = p.isAlive() ? "still running" : "exit code " + p.exitValue();
                last = new IllegalStateException("handled exited before 'ready' (" + exit + "): "
                        + String.join(" ", cmd) + "\n--- stderr tail (" + err + ") ---\n" + tail(err)
                        + "\n--- stdout tail ---\n" + tail(out));
            }
        }
        throw last;
    }

    /** Copies a directory tree (a stopped server's data directory). */
    static void copyTree(Path from, Path to) throws IOException {
        try (java.util.stream.Stream<Path> paths = Files.walk(from)) {
            for (Path p : (Iterable<Path>) paths::iterator) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(p, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
    }

    static void pumpStdout(Process p, Path log, CompletableFuture<Void> ready) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                Writer w = Files.newBufferedWriter(log, StandardCharsets.UTF_8)) {
            String line;
            while ((line = r.readLine()) != null) {
                w.write(line);
                w.write('\n');
                w.flush();
                if (line.trim().equals("ready")) {
                    ready.complete(null);
                }
            }
        } catch (IOException e) {
            // process went away
        } finally {
            ready.completeExceptionally(new IOException("stdout closed before 'ready'"));
        }
    }

    /** A port free for both TCP and UDP on 127.0.0.1, and another free TCP port. */
    static int[] freePorts() throws IOException {
        for (int i = 0; i < 100; i++) {
            try (ServerSocket tcp = new ServerSocket()) {
                tcp.setReuseAddress(false);
                tcp.bind(new InetSocketAddress(LOOPBACK, 0));
                int p = tcp.getLocalPort();
                try (DatagramSocket udp = new DatagramSocket(new InetSocketAddress(LOOPBACK, p));
                        ServerSocket http = new ServerSocket()) {
                    http.bind(new InetSocketAddress(LOOPBACK, 0));
                    return new int[] {p, http.getLocalPort()};
                } catch (IOException busy) {
                    // UDP port taken: try another
                }
            }
        }
        throw new IOException("no free TCP+UDP port pair found on 127.0.0.1");
    }

    /**
     * Starts {@code cmd} (stdout and stderr to {@code <label>.stdout.log} / {@code .stderr.log} in
     * {@code workDir}, the command line to {@code <label>.cmdline}) and waits for its {@code ready}.
     */
    static Process startProcess(Path workDir, String label, List<String> cmd, java.util.Map<String, String> env,
            long readyTimeoutMs) throws Exception {
        Path out = workDir.resolve(label + ".stdout.log");
        Path err = workDir.resolve(label + ".stderr.log");
        Files.writeString(workDir.resolve(label + ".cmdline"), String.join(" ", cmd) + "\n");
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(workDir.toFile()).redirectError(err.toFile());
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        CompletableFuture<Void> ready = new CompletableFuture<>();
        Thread pump = new Thread(() -> pumpStdout(p, out, ready), "handled-" + label);
        pump.setDaemon(true);
        pump.start();
        try {
            ready.get(readyTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            kill(p);
            throw new IllegalStateException(label + " did not become ready: " + String.join(" ", cmd)
                    + "\n--- stderr tail ---\n" + tail(err), e);
        }
        return p;
    }

    /** A process started on ports {@link #freePorts} chose, and those ports. */
    record Started(Process process, int[] ports) {}

    /**
     * {@link #startProcess} on fresh {@link #freePorts}, again (at most three times) when the
     * ports were taken between choosing and binding: free on 127.0.0.1 is no promise on another
     * loopback address, and the kernel hands the same range to outgoing connections.
     */
    static Started startOnFreePorts(Path workDir, String label, java.util.function.Function<int[], List<String>> cmd,
            long readyTimeoutMs) throws Exception {
        for (int attempt = 1; ; attempt++) {
            int[] ports = freePorts();
            try {
                return new Started(startProcess(workDir, label, cmd.apply(ports), java.util.Map.of(), readyTimeoutMs),
                        ports);
            } catch (IllegalStateException e) {
                if (attempt >= 3 || !String.valueOf(e.getMessage()).contains("Address already in use")) {
                    throw e;
                }
            }
        }
    }

    void adopt(Process p) {
        extras.add(p);
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Exit code if the server has exited, else null. */
    public Integer exitCode() {
        return process.isAlive() ? null : process.exitValue();
    }

    public String stderrTail() {
        return tail(stderrLog);
    }

    @Override
    public void close() {
        kill(process);
        extras.forEach(HandledServer::kill);
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
            // JVM shutting down
        }
    }

    static void kill(Process p) {
        if (!p.isAlive()) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(5, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    static String tail(Path file) {
        try {
            if (!Files.exists(file)) {
                return "(no file)";
            }
            List<String> lines = List.of(new String(Files.readAllBytes(file), StandardCharsets.UTF_8).split("\n"));
            List<String> last = new ArrayList<>(lines.subList(Math.max(0, lines.size() - 40), lines.size()));
            return String.join("\n", last);
        } catch (IOException e) {
            return "(unreadable: " + e + ")";
        }
    }
}
