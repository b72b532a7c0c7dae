// Shared by the harness's Java tools: the resolver set-up, fetching a server's site record,
// and the identities the tools authenticate as.
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Paths;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import net.handle.hdllib.*;

final class Hs {
    private Hs() {}

    /** TCP only, 30 s timeout, no sessions: every admin request is challenged and answered. */
    static HandleResolver newResolver() {
        HandleResolver r = new HandleResolver();
        r.setPreferredProtocols(new int[] {Interface.SP_HDL_TCP});
        r.setTcpTimeout(30_000);
        r.setSessionTracker(null);
        return r;
    }

    /** GET_SITE_INFO over TCP to HOST:PORT. */
    static SiteInfo fetchSite(HandleResolver resolver, String hostPort) throws Exception {
        int colon = hostPort.lastIndexOf(':');
        InetAddress addr = InetAddress.getByName(hostPort.substring(0, colon));
        int port = Integer.parseInt(hostPort.substring(colon + 1));
        GenericRequest req = new GenericRequest(Util.encodeString("/"), AbstractMessage.OC_GET_SITE_INFO, null);
        AbstractResponse resp = resolver.sendHdlTcpRequest(req, addr, port);
        if (!(resp instanceof GetSiteInfoResponse)) throw new HandleException(HandleException.INTERNAL_ERROR, "GET_SITE_INFO: " + resp);
        return ((GetSiteInfoResponse) resp).siteInfo;
    }

    /** pubkey:IDX:HANDLE:KEYFILE | seckey:IDX:HANDLE:SECRET | handled:CREDENTIALS.json */
    static AuthenticationInfo parseAuth(String spec) throws Exception {
        String[] p = spec.split(":", 2);
        switch (p[0]) {
            case "pubkey": {
                String[] q = p[1].split(":", 3);
                String[] hk = splitHandleAndLast(q[1] + ":" + q[2]);
                byte[] raw = Files.readAllBytes(Paths.get(hk[1]));
                return new PublicKeyAuthenticationInfo(Util.encodeString(hk[0]), Integer.parseInt(q[0]), Util.getPrivateKeyFromBytes(Util.decrypt(raw, null), 0));
            }
            case "seckey": {
                String[] q = p[1].split(":", 2);
                String[] hk = splitHandleAndLast(q[1]);
                return new SecretKeyAuthenticationInfo(Util.encodeString(hk[0]), Integer.parseInt(q[0]), Util.encodeString(hk[1]));
            }
            case "handled": {
                JsonObject c = new JsonParser().parse(Files.readString(Paths.get(p[1]))).getAsJsonObject();
                JsonObject sk = c.getAsJsonObject("secret_key");
                return new SecretKeyAuthenticationInfo(Util.encodeString(c.get("handle").getAsString()), sk.get("index").getAsInt(),
                        Util.encodeString(sk.get("secret").getAsString()));
            }
            default: throw new IllegalArgumentException("auth: pubkey:IDX:HANDLE:FILE | seckey:IDX:HANDLE:SECRET | handled:FILE");
        }
    }

    /** "TEST/ADMIN:/path" → ["TEST/ADMIN", "/path"]: handles have no ':' in this harness. */
    private static String[] splitHandleAndLast(String s) {
        int i = s.indexOf(':');
        return new String[] {s.substring(0, i), s.substring(i + 1)};
    }
}
