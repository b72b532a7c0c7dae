package org.handled.interop;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * Cluster mode of {@link HandledServer}: N stateless {@code handled} nodes on one Cassandra keyspace
 * (127.0.0.101…, the same ports), behind balancers on 127.0.0.1 where the tests connect: haproxy
 * round-robin with no stickiness for the native TCP port and the HTTP port (health-checked on
 * /readyz), nginx's stream module for UDP. Every node publishes 127.0.0.1 in the site record, so
 * clients that follow it come back through the balancers.
 */
final class ClusterLauncher {
    private ClusterLauncher() {}

    static HandledServer start(Path workDir, Path importFile, int nodes) throws Exception {
        Path bin = HandledServer.binaryPath();
        int[] ports = HandledServer.freePorts();
        int port = ports[0];
        int http = ports[1];
        String keyspace = "jc_" + UUID.randomUUID().toString().replace("-", "").substring(0, 16);
        Path config = workDir.resolve("node.toml");
        Files.writeString(config, "public_address = \"127.0.0.1\"\n");
        Path creds = workDir.resolve("admin-" + Fixtures.PREFIX + ".json");
        HandledServer first = null;
        List<Process> started = new ArrayList<>();
        try {
            for (int i = 1; i <= nodes; i++) {
                List<String> cmd = new ArrayList<>(List.of(bin.toString(), "serve", "--config", config.toString(),
                        "--data-dir", workDir.resolve("data-" + i).toString(),
                        "--admin-credentials", (i == 1 ? creds : workDir.resolve("admin-node" + i + ".json")).toString(),
                        "--listen", nodeAddress(i), "--port", Integer.toString(port),
                        "--http-port", Integer.toString(http), "--prefix", Fixtures.PREFIX));
                if (i == 1) {
                    cmd.add("--import");
                    cmd.add(importFile.toString());
                }
                Process p = startNode(workDir, i, cmd, keyspace);
                started.add(p);
                if (i == 1) {
                    first = new HandledServer(bin, workDir, port, http, p, workDir.resolve("node1.stdout.log"),
                            workDir.resolve("node1.stderr.log"), creds);
                } else {
                    first.adopt(p);
                }
            }
            first.adopt(haproxy(workDir, port, http, nodes));
            first.adopt(nginx(workDir, port, nodes));
            awaitBalancer(port, http);
            return first;
        } catch (Exception e) {
            if (first != null) {
                first.close();
            } else {
                started.forEach(HandledServer::kill);
            }
            throw e;
        }
    }

    static String nodeAddress(int i) {
        return "127.0.0." + (100 + i);
    }

    private static Process startNode(Path workDir, int i, List<String> cmd, String keyspace) throws Exception {
        return HandledServer.startProcess(workDir, "node" + i, cmd, java.util.Map.of(
                "HANDLED_STORE", "cassandra",
                "HANDLED_CASSANDRA_CONTACT_POINTS", System.getenv("HANDLED_TEST_CASSANDRA"),
                "HANDLED_CASSANDRA_REPLICATION", "1",
                "HANDLED_CASSANDRA_KEYSPACE", keyspace), HandledServer.READY_TIMEOUT_MS * 3);
    }

    private static Process haproxy(Path workDir, int port, int http, int nodes) throws IOException {
        StringBuilder cfg = new StringBuilder();
        cfg.append("global\n  maxconn 4096\n\ndefaults\n  mode tcp\n  timeout connect 2s\n")
                .append("  timeout client 60s\n  timeout server 60s\n  timeout check 1s\n\n");
        for (String[] fe : new String[][] {{"native", Integer.toString(port)}, {"http", Integer.toString(http)}}) {
            cfg.append("frontend ").append(fe[0]).append("\n  bind 127.0.0.1:").append(fe[1])
                    .append("\n  default_backend ").append(fe[0]).append("_nodes\n\n");
            cfg.append("backend ").append(fe[0]).append("_nodes\n  balance roundrobin\n")
                    .append("  option httpchk GET /readyz\n");
            for (int i = 1; i <= nodes; i++) {
                cfg.append("  server n").append(i).append(' ').append(nodeAddress(i)).append(':').append(fe[1])
                        .append(" check port ").append(http).append(" inter 200ms fall 2 rise 2\n");
            }
            cfg.append('\n');
        }
        Path file = workDir.resolve("haproxy.cfg");
        Files.writeString(file, cfg.toString());
        return new ProcessBuilder("haproxy", "-db", "-f", file.toString())
                .redirectErrorStream(true).redirectOutput(workDir.resolve("haproxy.log").toFile()).start();
    }

    private static Process nginx(Path workDir, int port, int nodes) throws IOException {
        StringBuilder up = new StringBuilder();
        for (int i = 1; i <= nodes; i++) {
            up.append("    server ").append(nodeAddress(i)).append(':').append(port).append(";\n");
        }
        String cfg = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n"
                + "daemon off;\nworker_processes 1;\npid " + workDir.resolve("nginx.pid") + ";\n"
                + "error_log " + workDir.resolve("nginx.error.log") + " warn;\n"
                + "events { worker_connections 4096; }\n"
                + "stream {\n  upstream nodes {\n" + up + "  }\n"
                + "  server {\n    listen 127.0.0.1:" + port + " udp;\n    proxy_pass nodes;\n"
                + "    proxy_timeout 3s;\n  }\n}\n";
        Path file = workDir.resolve("nginx.conf");
        Files.writeString(file, cfg);
        return new ProcessBuilder("nginx", "-c", file.toString(), "-p", workDir.toString())
                .redirectErrorStream(true).redirectOutput(workDir.resolve("nginx.log").toFile()).start();
    }

    /** Until the balanced TCP port accepts and /readyz answers 200 through it. */
    private static void awaitBalancer(int port, int http) throws Exception {
        HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
        HttpRequest ready = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + http + "/readyz"))
                .timeout(Duration.ofSeconds(2)).build();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(HandledServer.LOOPBACK, port), 1000);
                if (client.send(ready, HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                last = e;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("the balancers on 127.0.0.1:" + port + "/" + http + " did not come up", last);
    }
}
