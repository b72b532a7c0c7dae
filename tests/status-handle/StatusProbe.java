// Resolves one handle at one server with the official Handle.Net Java client library, as a
// stock client does (site record from GET_SITE_INFO, then sendRequestToServer with one preferred
// protocol, so challenges are answered and sessions are used as in hdl-qresolver), and prints
// one JSON line: {"protocol", "auth", "rc", "values": [{index, type, data, permissions, ttl, ttlType, timestamp}]}
// (or "clientError" when the library gives up, e.g. challenged without credentials).
//
//   java -cp HANDLE_JARS StatusProbe.java HOST PORT HANDLE tcp|udp|http [INDEX:ADMIN_HANDLE SECRET]
//
// Used by compare.sh on the original Handle.Net server and on handled alike.
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.net.InetAddress;
import net.handle.hdllib.*;

public class StatusProbe {
    public static void main(String[] args) throws Exception {
        if (args.length != 4 && args.length != 6) {
            System.err.println("usage: StatusProbe HOST PORT HANDLE tcp|udp|http [INDEX:ADMIN SECRET]");
            System.exit(1);
        }
        InetAddress host = InetAddress.getByName(args[0]);
        int port = Integer.parseInt(args[1]);
        String handle = args[2];
        int proto;
        switch (args[3]) {
            case "tcp": proto = Interface.SP_HDL_TCP; break;
            case "udp": proto = Interface.SP_HDL_UDP; break;
            case "http": proto = Interface.SP_HDL_HTTP; break;
            default: throw new IllegalArgumentException("protocol must be tcp, udp or http: " + args[3]);
        }
        AuthenticationInfo auth = null;
        if (args.length == 6) {
            int colon = args[4].indexOf(':');
            if (colon < 1) throw new IllegalArgumentException("identity must be INDEX:HANDLE: " + args[4]);
            auth = new SecretKeyAuthenticationInfo(Util.encodeString(args[4].substring(colon + 1)),
                    Integer.parseInt(args[4].substring(0, colon)), Util.encodeString(args[5]), false);
        }

        HandleResolver r = new HandleResolver();
        r.getConfiguration().setAutoUpdateRootInfo(false);
        r.setTcpTimeout(10000);
        r.setUseIPv6FastFallback(false);
        GenericRequest siteReq = new GenericRequest(Util.encodeString("/"), AbstractMessage.OC_GET_SITE_INFO, null);
        AbstractResponse siteResp = r.sendHdlTcpRequest(siteReq, host, port);
        if (!(siteResp instanceof GetSiteInfoResponse)) {
            throw new IllegalStateException("GET_SITE_INFO failed: " + siteResp);
        }
        SiteInfo site = ((GetSiteInfoResponse) siteResp).siteInfo;

        ResolutionRequest req = new ResolutionRequest(Util.encodeString(handle), null, null, auth);
        // An authenticated client asks for every value, as hdl-qresolver does with credentials;
        // STATUS_PROBE_ALL_VALUES asks for them anonymously too.
        req.ignoreRestrictedValues = auth == null && System.getenv("STATUS_PROBE_ALL_VALUES") == null;
        r.setPreferredProtocols(new int[] {proto});
        JsonObject out = new JsonObject();
        out.addProperty("protocol", args[3]);
        out.addProperty("auth", auth != null);
        AbstractResponse resp;
        try {
            resp = r.sendRequestToServer(req, site, site.servers[0]);
        } catch (HandleException e) {
            // E.g. a challenge the client has no credentials to answer: the library's own code.
            out.addProperty("clientError", HandleException.getCodeStr(e.getCode()));
            System.out.println(out);
            return;
        }
        out.addProperty("rc", resp.responseCode);
        JsonArray values = new JsonArray();
        if (resp instanceof ResolutionResponse) {
            for (HandleValue v : ((ResolutionResponse) resp).getHandleValues()) {
                JsonObject o = new JsonObject();
                o.addProperty("index", v.getIndex());
                o.addProperty("type", v.getTypeAsString());
                o.addProperty("data", v.getDataAsString());
                o.addProperty("permissions", (v.getAdminCanRead() ? "1" : "0") + (v.getAdminCanWrite() ? "1" : "0")
                        + (v.getAnyoneCanRead() ? "1" : "0") + (v.getAnyoneCanWrite() ? "1" : "0"));
                o.addProperty("ttl", v.getTTL());
                o.addProperty("ttlType", v.getTTLType());
                o.addProperty("timestamp", v.getTimestamp());
                values.add(o);
            }
        } else if (resp instanceof ErrorResponse) {
            out.addProperty("message", Util.decodeString(((ErrorResponse) resp).message));
        }
        out.add("values", values);
        System.out.println(out);
    }
}
