package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import net.handle.apps.simple.LocalInfoConverter;
import net.handle.hdllib.FilesystemConfiguration;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.SiteInfo;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Field-notes method 3: a client config dir with {@code local_info.json} mapping
 * {@code 0.NA/TEST} to the site record the server itself answered, and {@code config.dct} with
 * {@code auto_update_root_info = no}; then a plain {@code new HandleResolver().resolveHandle()} in
 * a forked JVM ({@link ConfigDirClientMain}) with {@code -Dnet.handle.configDir}. The child runs
 * under the loopback-only {@link NetworkGuard}: any attempt to reach the public registry fails at
 * once and is counted.
 */
class ConfigDirClientTest extends ServerTestBase {
    private static final long CHILD_TIMEOUT_S = 45;

    private static Path configDir;
    private static Map<String, List<String>> lines;
    private static String childOutput;

    @BeforeAll
    static void runPlainClient() throws Exception {
        configDir = server.workDir.resolve("client-config");
        Files.createDirectories(configDir);
        Map<String, SiteInfo[]> local = new LinkedHashMap<>();
        local.put("0.NA/" + Fixtures.PREFIX, new SiteInfo[] {site()});
        Files.writeString(configDir.resolve("local_info.json"), LocalInfoConverter.convertToJson(local));
        Files.writeString(configDir.resolve("config.dct"), "{\n  \"auto_update_root_info\" = \"no\"\n}\n");

        // Premise: the library reads this directory the way we mean it.
        FilesystemConfiguration cfg = new FilesystemConfiguration(configDir.toFile());
        assertFalse(cfg.isAutoUpdateRootInfo(), "config.dct not understood by the library");
        assertNotNull(cfg.getLocalSites("0.NA/TEST"), "local_info.json not understood by the library");

        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Djava.security.manager=allow");
        cmd.add("-Dnet.handle.configDir=" + configDir);
        cmd.add("-cp");
        cmd.add(childClasspath());
        cmd.add(ConfigDirClientMain.class.getName());
        // Last one is the guard check: a prefix not in local_info.json makes the client go to the
        // global registry, which the guard must refuse quickly.
        cmd.add(Fixtures.H1);
        cmd.add("test/abc");
        cmd.add("TEST/no-such-handle");
        cmd.add("NOTLOCAL/1");
        Path out = server.workDir.resolve("plain-client.out.log");
        Path err = server.workDir.resolve("plain-client.err.log");
        Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        p.getOutputStream().close();
        if (!p.waitFor(CHILD_TIMEOUT_S, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            p.waitFor(5, TimeUnit.SECONDS);
            fail("plain client JVM did not finish within " + CHILD_TIMEOUT_S + " s; stdout:\n"
                    + HandledServer.tail(out) + "\nstderr:\n" + HandledServer.tail(err));
        }
        childOutput = Files.readString(out, StandardCharsets.UTF_8) + "\n--- stderr ---\n" + HandledServer.tail(err);
        assertEquals(0, p.exitValue(), "plain client JVM exit code; output:\n" + childOutput);
        lines = new LinkedHashMap<>();
        for (String line : Files.readAllLines(out, StandardCharsets.UTF_8)) {
            String[] f = line.split("\t", 2);
            lines.computeIfAbsent(f[0], k -> new ArrayList<>()).add(f.length > 1 ? f[1] : "");
        }
    }

    @Test
    void childRanWithGuardAndNoAutoUpdate() {
        assertEquals(List.of("false"), lines.get("AUTO_UPDATE"), childOutput);
        assertEquals(List.of("true"), lines.get("GUARD"), "network guard not active in the child:\n" + childOutput);
        assertEquals(List.of(""), lines.get("DONE"), childOutput);
    }

    @Test
    void plainClientResolvesThroughLocalInfo() {
        assertOk(Fixtures.H1, Fixtures.values(Fixtures.H1));
        assertOk("test/abc", Fixtures.values(Fixtures.ABC));
        assertEquals("0", blockedAfter(Fixtures.H1), "the client tried to leave 127.0.0.1:\n" + childOutput);
        assertEquals("0", blockedAfter("test/abc"), "the client tried to leave 127.0.0.1:\n" + childOutput);
    }

    @Test
    void plainClientGetsHandleNotFound() {
        String[] f = result("TEST/no-such-handle");
        assertEquals("FAIL", f[0], "expected HandleException(HANDLE_DOES_NOT_EXIST):\n" + childOutput);
        assertEquals(Integer.toString(HandleException.HANDLE_DOES_NOT_EXIST), f[2],
                "HandleException code (9 = handle does not exist, i.e. server said RC 100):\n" + childOutput);
        assertEquals("0", blockedAfter("TEST/no-such-handle"), "the client tried to leave 127.0.0.1:\n" + childOutput);
    }

    /** Self-check of the harness: a non-local prefix must fail fast through the guard, not hang. */
    @Test
    void guardStopsGlobalResolutionFast() {
        String[] f = result("NOTLOCAL/1");
        assertEquals("FAIL", f[0], childOutput);
        assertTrue(Long.parseLong(f[3]) < 20_000, "global lookup took " + f[3] + " ms:\n" + childOutput);
        assertTrue(Integer.parseInt(blockedAfter("NOTLOCAL/1")) > 0,
                "expected the guard to refuse the public registry:\n" + childOutput);
    }

    /** Returns {"OK"|"FAIL", handle, count|code, ms, ...}. */
    private static String[] result(String handle) {
        for (String k : new String[] {"OK", "FAIL"}) {
            for (String rest : lines.getOrDefault(k, List.of())) {
                String[] f = rest.split("\t");
                if (f[0].equals(handle)) {
                    String[] r = new String[f.length + 1];
                    r[0] = k;
                    System.arraycopy(f, 0, r, 1, f.length);
                    return r;
                }
            }
        }
        throw new AssertionError("no result line for " + handle + ":\n" + childOutput);
    }

    private static String blockedAfter(String handle) {
        for (String rest : lines.getOrDefault("BLOCKED", List.of())) {
            String[] f = rest.split("\t");
            if (f[0].equals(handle)) {
                return f[1];
            }
        }
        throw new AssertionError("no BLOCKED line for " + handle + ":\n" + childOutput);
    }

    private static void assertOk(String handle, HandleValue[] expected) {
        String[] r = result(handle);
        assertEquals("OK", r[0], "resolveHandle(\"" + handle + "\") failed:\n" + childOutput);
        List<String> got = new ArrayList<>();
        for (String rest : lines.getOrDefault("VALUE", List.of())) {
            if (rest.startsWith(handle + "\t")) {
                got.add(rest.substring(handle.length() + 1));
            }
        }
        List<String> want = new ArrayList<>();
        for (HandleValue v : expected) {
            want.add(v.getIndex() + "\t" + v.getTypeAsString() + "\t" + HexFormat.of().formatHex(v.getData()) + "\t"
                    + v.getTTLType() + "\t" + v.getTTL() + "\t" + v.getPermissionString());
        }
        assertEquals(want, got, "values of " + handle + " (index, type, data hex, ttl type, ttl, perms)");
    }

    /**
     * The test JVM's class path (Surefire puts the real test class path in java.class.path) plus,
     * to be safe, the locations of the classes the child needs.
     */
    private static String childClasspath() throws URISyntaxException {
        Set<String> cp = new LinkedHashSet<>();
        for (String e : System.getProperty("java.class.path", "").split(File.pathSeparator)) {
            if (!e.isBlank() && Files.exists(Paths.get(e))) {
                cp.add(e);
            }
        }
        for (Class<?> c : new Class<?>[] {ConfigDirClientMain.class, HandleResolver.class,
                com.google.gson.Gson.class, net.cnri.io.AtomicFile.class}) {
            cp.add(Paths.get(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString());
        }
        return String.join(File.pathSeparator, cp);
    }
}
