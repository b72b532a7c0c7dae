// Administration and snapshot client for the replication harness, on the Handle.Net 9.0.0
// Java library (the judge's own client code). Single-file program:
//
//   javac -cp "$HSJ_HOME/lib/*" -d CLASSES Hs.java HsTool.java
//   java -cp "CLASSES:$HSJ_HOME/lib/*" HsTool [command line ...]      (no arguments: commands from stdin)
//
// Commands, one per line (or the arguments as one line); state carries over between lines:
//   server HOST:PORT                 talk to this server (TCP; its site record is fetched first)
//   auth pubkey:IDX:HANDLE:KEYFILE   Handle.Net private key file (admpriv.bin, unencrypted)
//   auth seckey:IDX:HANDLE:SECRET
//   auth handled:CREDENTIALS.json    handled's --admin-credentials file (HS_SECKEY)
//   create HANDLE SPEC...            SPEC = IDX:TYPE:DATA[|ttl=N][|abs][|perms=ARWR] (perms: 4 bits
//                                    admin-read admin-write public-read public-write, e.g. 1100;
//                                    refs=IDX:HANDLE,IDX:HANDLE: the value's references);
//                                    TYPE HS_ADMIN takes DATA = ADMIN_IDX:ADMIN_HANDLE (all rights);
//                                    DATA = @FILE takes the file's bytes (e.g. an HS_PUBKEY)
//   add HANDLE SPEC... | modify HANDLE SPEC... | remove HANDLE IDX... | delete HANDLE
//   home PREFIX | unhome PREFIX      e.g. 0.NA/TEST2
//   snapshot PREFIX...               JSON lines on stdout: every handle listed under each prefix
//                                    (LIST_HANDLES) with all its values (authenticated resolution,
//                                    restricted values included), then the homed prefixes
//   resolve HANDLE...                records of these handles as `snapshot` prints them, marked
//                                    "unlisted" (handles a server did not list, e.g. a mirror
//                                    refusing LIST_HANDLES, are still compared value by value)
//   await HANDLE IDX DATA TIMEOUT_MS poll (resolution, 20 ms apart) until value IDX has DATA
//                                    ("-" = until the handle is gone); prints the wait in ms
//   sleep MS
//   siteinfo FILE                    the server's site record (GET_SITE_INFO) as siteinfo.json
//                                    (what a Handle.Net mirror takes as txnsrcsv.json)
//   keygen PRIV.pk8 PUB.bin          RSA 2048 identity: PKCS#8 DER private key (handled's
//                                    replication_private_key), HS_PUBKEY bytes of the public key
// Any failure prints the reason on stderr and exits 1.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

import net.handle.hdllib.*;

public class HsTool {
    static HandleResolver resolver = Hs.newResolver();
    static SiteInfo site;
    static ServerInfo serverInfo;
    static AuthenticationInfo auth;

    public static void main(String[] args) throws Exception {
        if (args.length > 0) {
            run(args);
            return;
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty() || line.startsWith("#")) continue;
            run(line.split("\\s+"));
        }
    }

    static void run(String[] a) throws Exception {
        try {
            runChecked(a);
        } catch (Exception e) {
            System.err.println("HsTool: " + String.join(" ", a) + ": " + e);
            System.exit(1);
        }
    }

    static void runChecked(String[] a) throws Exception {
        String cmd = a[0];
        switch (cmd) {
            case "server": connect(a[1]); return;
            case "auth": auth = Hs.parseAuth(a[1]); return;
            case "create": admin(new CreateHandleRequest(h(a[1]), specs(a, 2), auth)); return;
            case "add": admin(new AddValueRequest(h(a[1]), specs(a, 2), auth)); return;
            case "modify": admin(new ModifyValueRequest(h(a[1]), specs(a, 2), auth)); return;
            case "remove": {
                int[] idx = new int[a.length - 2];
                for (int i = 2; i < a.length; i++) idx[i - 2] = Integer.parseInt(a[i]);
                admin(new RemoveValueRequest(h(a[1]), idx, auth));
                return;
            }
            case "delete": admin(new DeleteHandleRequest(h(a[1]), auth)); return;
            case "home": admin(new GenericRequest(h(a[1]), AbstractMessage.OC_HOME_NA, auth)); return;
            case "unhome": admin(new GenericRequest(h(a[1]), AbstractMessage.OC_UNHOME_NA, auth)); return;
            case "snapshot": snapshot(Arrays.copyOfRange(a, 1, a.length)); return;
            case "resolve": resolveUnlisted(Arrays.copyOfRange(a, 1, a.length)); return;
            case "await": await(a[1], Integer.parseInt(a[2]), a[3], Long.parseLong(a[4])); return;
            case "sleep": Thread.sleep(Long.parseLong(a[1])); return;
            case "siteinfo": Files.writeString(Paths.get(a[1]), net.handle.apps.simple.SiteInfoConverter.convertToJson(site)); return;
            case "keygen": keygen(a[1], a[2]); return;
            default: throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static byte[] h(String s) {
        return Util.encodeString(s);
    }

    static void connect(String hostPort) throws Exception {
        site = Hs.fetchSite(resolver, hostPort);
        serverInfo = site.servers[0];
    }

    static HandleValue[] specs(String[] a, int from) {
        List<HandleValue> out = new ArrayList<>();
        for (int i = from; i < a.length; i++) out.add(spec(a[i]));
        return out.toArray(new HandleValue[0]);
    }

    static HandleValue spec(String s) {
        String[] parts = s.split("\\|");
        String[] f = parts[0].split(":", 3);
        int idx = Integer.parseInt(f[0]);
        String type = f[1];
        byte[] data;
        if (type.equals("HS_ADMIN")) {
            String[] ad = f[2].split(":", 2);
            AdminRecord rec = new AdminRecord(h(ad[1]), Integer.parseInt(ad[0]), true, true, true, true, true, true, true, true, true, true, true, true);
            data = Encoder.encodeAdminRecord(rec);
        } else if (f[2].startsWith("@")) {
            try {
                data = Files.readAllBytes(Paths.get(f[2].substring(1)));
            } catch (java.io.IOException e) {
                throw new IllegalArgumentException("value data " + f[2] + ": " + e);
            }
        } else {
            data = h(f[2]);
        }
        HandleValue v = new HandleValue(idx, h(type), data);
        if (type.equals("HS_SECKEY")) v.setAnyoneCanRead(false);
        for (int i = 1; i < parts.length; i++) {
            String o = parts[i];
            if (o.startsWith("ttl=")) v.setTTL(Integer.parseInt(o.substring(4)));
            else if (o.equals("abs")) v.setTTLType(HandleValue.TTL_TYPE_ABSOLUTE);
            else if (o.startsWith("perms=")) {
                String b = o.substring(6);
                v.setAdminCanRead(b.charAt(0) == '1');
                v.setAdminCanWrite(b.charAt(1) == '1');
                v.setAnyoneCanRead(b.charAt(2) == '1');
                v.setAnyoneCanWrite(b.charAt(3) == '1');
            } else if (o.startsWith("refs=")) {
                List<ValueReference> refs = new ArrayList<>();
                for (String r : o.substring(5).split(",")) {
                    String[] ih = r.split(":", 2);
                    refs.add(new ValueReference(h(ih[1]), Integer.parseInt(ih[0])));
                }
                v.setReferences(refs.toArray(new ValueReference[0]));
            } else throw new IllegalArgumentException("value option " + o);
        }
        return v;
    }

    static AbstractResponse send(AbstractRequest req, ResponseMessageCallback cb) throws HandleException {
        if (site == null) throw new IllegalStateException("no 'server' command yet");
        return cb == null ? resolver.sendRequestToServer(req, site, serverInfo)
                : resolver.sendRequestToServer(req, site, serverInfo, cb);
    }

    static void admin(AbstractRequest req) throws HandleException {
        AbstractResponse r = send(req, null);
        if (r.responseCode != AbstractMessage.RC_SUCCESS) {
            throw new HandleException(HandleException.INTERNAL_ERROR, "failed: " + r);
        }
    }

    static void snapshot(String[] prefixes) throws Exception {
        TreeMap<String, JsonObject> records = new TreeMap<>();
        for (String prefix : prefixes) {
            List<byte[]> handles = new ArrayList<>();
            AbstractResponse last = send(new ListHandlesRequest(h(prefix), auth), resp -> {
                if (resp instanceof ListHandlesResponse) handles.addAll(Arrays.asList(((ListHandlesResponse) resp).handles));
            });
            if (last.responseCode != AbstractMessage.RC_SUCCESS) {
                // e.g. a prefix unhomed by the test: recorded, so that both sides must agree
                JsonObject o = new JsonObject();
                o.addProperty("prefix", prefix);
                o.addProperty("list_error", AbstractMessage.getResponseCodeMessage(last.responseCode));
                System.out.println(o);
                continue;
            }
            for (byte[] hdl : handles) records.put(Util.decodeString(hdl), record(hdl));
        }
        for (JsonObject o : records.values()) System.out.println(o);
        List<String> nas = new ArrayList<>();
        AbstractResponse last = send(new ListNAsRequest(h("0.NA"), auth), resp -> {
            if (resp instanceof ListNAsResponse) for (byte[] n : ((ListNAsResponse) resp).handles) nas.add(Util.decodeString(n));
        });
        if (last.responseCode == AbstractMessage.RC_SUCCESS) {
            nas.sort(null);
            for (String n : nas) {
                JsonObject o = new JsonObject();
                o.addProperty("homed", n);
                System.out.println(o);
            }
        } else {
            JsonObject o = new JsonObject();
            o.addProperty("homed_error", last.toString());
            System.out.println(o);
        }
    }

    /** One handle with all its values (restricted ones too), or the error it resolved to. */
    static JsonObject record(byte[] hdl) throws HandleException {
        ResolutionRequest rr = new ResolutionRequest(hdl, null, null, auth);
        rr.ignoreRestrictedValues = false;
        AbstractResponse r = send(rr, null);
        JsonObject rec = new JsonObject();
        rec.addProperty("handle", Util.decodeString(hdl));
        if (r instanceof ResolutionResponse) {
            HandleValue[] vals = ((ResolutionResponse) r).getHandleValues();
            Arrays.sort(vals, HandleValue.INDEX_COMPARATOR);
            JsonArray arr = new JsonArray();
            for (HandleValue v : vals) arr.add(value(v));
            rec.add("values", arr);
        } else {
            rec.addProperty("error", AbstractMessage.getResponseCodeMessage(r.responseCode));
        }
        return rec;
    }

    /** Handles another snapshot listed, resolved here by name (for a server that cannot list). */
    static void resolveUnlisted(String[] handles) throws HandleException {
        for (String hdl : handles) {
            JsonObject rec = record(h(hdl));
            rec.addProperty("unlisted", true);
            System.out.println(rec);
        }
    }

    static JsonObject value(HandleValue v) {
        JsonObject o = new JsonObject();
        o.addProperty("index", v.getIndex());
        o.addProperty("type", v.getTypeAsString());
        o.addProperty("data_hex", Util.decodeHexString(v.getData(), false));
        o.addProperty("ttl_type", v.getTTLType());
        o.addProperty("ttl", v.getTTL());
        o.addProperty("timestamp", v.getTimestamp());
        o.addProperty("perms", (v.getAdminCanRead() ? "1" : "0") + (v.getAdminCanWrite() ? "1" : "0")
                + (v.getAnyoneCanRead() ? "1" : "0") + (v.getAnyoneCanWrite() ? "1" : "0"));
        JsonArray refs = new JsonArray();
        ValueReference[] rs = v.getReferences();
        if (rs != null) for (ValueReference r : rs) refs.add(r.index + ":" + Util.decodeString(r.handle));
        o.add("refs", refs);
        return o;
    }

    /** An RSA identity for a mirror: PKCS#8 DER private key, HS_PUBKEY value bytes of the public one. */
    static void keygen(String privFile, String pubFile) throws Exception {
        java.security.KeyPairGenerator g = java.security.KeyPairGenerator.getInstance("RSA");
        g.initialize(2048);
        java.security.KeyPair kp = g.generateKeyPair();
        Files.write(Paths.get(privFile), kp.getPrivate().getEncoded());
        Files.write(Paths.get(pubFile), Util.getBytesFromPublicKey(kp.getPublic()));
    }

    static void await(String handle, int idx, String data, long timeoutMs) throws Exception {
        long t0 = System.nanoTime();
        long deadline = t0 + timeoutMs * 1_000_000L;
        while (true) {
            ResolutionRequest rr = new ResolutionRequest(h(handle), null, new int[] {idx}, null);
            AbstractResponse r = send(rr, null);
            boolean done;
            if (data.equals("-")) {
                done = r.responseCode == AbstractMessage.RC_HANDLE_NOT_FOUND;
            } else {
                done = false;
                if (r instanceof ResolutionResponse) {
                    for (HandleValue v : ((ResolutionResponse) r).getHandleValues()) {
                        if (v.getIndex() == idx && v.getDataAsString().equals(data)) done = true;
                    }
                }
            }
            long now = System.nanoTime();
            if (done) {
                System.out.println((now - t0) / 1_000_000);
                return;
            }
            if (now > deadline) throw new HandleException(HandleException.INTERNAL_ERROR, "timeout after " + timeoutMs + " ms; last: " + r);
            Thread.sleep(20);
        }
    }
}
