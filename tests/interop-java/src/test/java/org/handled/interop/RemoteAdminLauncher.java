package org.handled.interop;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.GenericRequest;
import net.handle.hdllib.GetSiteInfoResponse;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.Util;

/**
 * Remote-admin mode of {@link HandledServer} ({@code HANDLED_TEST_REMOTE_ADMIN=1}, see
 * tests/remote-admin/run.sh): two servers. A, on 127.0.0.2, plays the global registry: it homes
 * {@code 0.NA} (every prefix handle) and {@code ADM}, whose {@code ADM/ADMIN} holds the admin's
 * keys. B, on 127.0.0.1 where the tests connect, homes TEST, names {@code 300/301/302:ADM/ADMIN}
 * in {@code server_admins} and finds A through {@code root_info} (A's site record). The suite's
 * admin credentials are A's, so every admin request to B is authenticated by asking A.
 */
final class RemoteAdminLauncher {
    static final String REGISTRY_ADDRESS = "127.0.0.2";
    static final String ADMIN_PREFIX = "ADM";

    private RemoteAdminLauncher() {}

    static boolean enabled() {
        String v = System.getenv("HANDLED_TEST_REMOTE_ADMIN");
        return v != null && !v.isBlank() && !v.equals("0");
    }

    static HandledServer start(Path workDir, Path importFile) throws Exception {
        Path bin = HandledServer.binaryPath();
        Path registryCreds = workDir.resolve("registry-admin.json");
        HandledServer.Started started = HandledServer.startOnFreePorts(workDir, "registry", p -> List.of(bin.toString(),
                "serve", "--ephemeral", "--admin-credentials", registryCreds.toString(),
                "--listen", REGISTRY_ADDRESS, "--port", Integer.toString(p[0]),
                "--http-port", Integer.toString(p[1]), "--prefix", "0.NA," + ADMIN_PREFIX),
                HandledServer.READY_TIMEOUT_MS);
        Process registry = started.process();
        int[] registryPorts = started.ports();
        try {
            InetSocketAddress home = new InetSocketAddress(InetAddress.getByName(REGISTRY_ADDRESS), registryPorts[0]);
            Path rootInfo = workDir.resolve("root_info.bin");
            Files.write(rootInfo, Encoder.encodeSiteInfoRecord(siteOf(home).siteInfo));
            Path config = workDir.resolve("local.toml");
            Files.writeString(config, "server_admins = [\"300:ADM/ADMIN\", \"301:ADM/ADMIN\", \"302:ADM/ADMIN\"]\n"
                    + "root_info = \"" + rootInfo + "\"\n");
            HandledServer.Started localStarted = HandledServer.startOnFreePorts(workDir, "local", p -> List.of(
                    bin.toString(), "serve", "--ephemeral", "--config", config.toString(),
                    "--admin-credentials", workDir.resolve("local-admin.json").toString(),
                    "--listen", "127.0.0.1", "--port", Integer.toString(p[0]),
                    "--http-port", Integer.toString(p[1]), "--prefix", Fixtures.PREFIX,
                    "--import", importFile.toString()), HandledServer.READY_TIMEOUT_MS);
            Process local = localStarted.process();
            int[] ports = localStarted.ports();
            HandledServer s = new HandledServer(bin, workDir, ports[0], ports[1], local,
                    workDir.resolve("local.stdout.log"), workDir.resolve("local.stderr.log"),
                    workDir.resolve("registry-admin-" + ADMIN_PREFIX + ".json"));
            s.adopt(registry);
            s.adminHome = home;
            return s;
        } catch (Exception e) {
            HandledServer.kill(registry);
            throw e;
        }
    }

    /** GET_SITE_INFO straight to {@code addr} over TCP. */
    static GetSiteInfoResponse siteOf(InetSocketAddress addr) throws Exception {
        GenericRequest req = new GenericRequest(Util.encodeString("/"), AbstractMessage.OC_GET_SITE_INFO, null);
        HandleResolver r = new HandleResolver();
        r.getConfiguration().setAutoUpdateRootInfo(false);
        r.setTcpTimeout(ServerTestBase.TCP_TIMEOUT_MS);
        AbstractResponse resp = r.sendHdlTcpRequest(req, addr.getAddress(), addr.getPort());
        if (!(resp instanceof GetSiteInfoResponse)) {
            throw new IllegalStateException("GET_SITE_INFO to " + addr + ": " + resp);
        }
        return (GetSiteInfoResponse) resp;
    }
}
