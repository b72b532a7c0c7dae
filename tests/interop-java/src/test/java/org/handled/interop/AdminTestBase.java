package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractRequest;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.AddValueRequest;
import net.handle.hdllib.AdminRecord;
import net.handle.hdllib.AuthenticationInfo;
import net.handle.hdllib.Common;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ListHandlesResponse;
import net.handle.hdllib.PublicKeyAuthenticationInfo;
import net.handle.hdllib.SecretKeyAuthenticationInfo;
import net.handle.hdllib.Util;
import org.junit.jupiter.api.BeforeAll;

/**
 * Administration helpers: the TEST/ADMIN credentials the server wrote at start-up (secret key at
 * 300, RSA key at 301), a DSA key generated here and added as HS_PUBKEY 302, resolvers with and
 * without the default session tracker, and sending through
 * {@code sendRequestToServer(req, site, server)} with one preferred protocol, i.e. the full
 * client machinery (session setup, challenge answering, MACs, encryption).
 */
public abstract class AdminTestBase extends ServerTestBase {
    public static final int SECKEY_INDEX = 300;
    public static final int RSA_INDEX = 301;
    public static final int DSA_INDEX = 302;

    /** Which key proves the admin identity. */
    public enum Auth { SECKEY, RSA, DSA }

    protected static byte[] adminHandle;
    protected static byte[] secret;
    protected static PrivateKey rsaKey;
    protected static KeyPair dsaKeys;

    @BeforeAll
    static void loadAdminCredentials() throws Exception {
        JsonObject c = JsonParser.parseString(Files.readString(server.adminCredentials)).getAsJsonObject();
        adminHandle = Util.encodeString(c.get("handle").getAsString());
        secret = c.getAsJsonObject("secret_key").get("secret").getAsString().getBytes(StandardCharsets.UTF_8);
        byte[] pkcs8 = Base64.getDecoder().decode(c.getAsJsonObject("public_key").get("private_key_pkcs8").getAsString());
        rsaKey = KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(pkcs8));
        // 1024 bits: at protocol 2.10 clients sign with SHA1withDSA, which the JDK refuses
        // for larger DSA keys.
        KeyPairGenerator g = KeyPairGenerator.getInstance("DSA");
        g.initialize(1024);
        dsaKeys = g.generateKeyPair();
        HandleValue pub = new HandleValue(DSA_INDEX, "HS_PUBKEY", Util.getBytesFromPublicKey(dsaKeys.getPublic()));
        AddValueRequest add = new AddValueRequest(adminHandle, pub, auth(Auth.SECKEY));
        HandleResolver r = adminResolver(Proto.TCP, false);
        // Remote-admin mode: the admin handle lives on the registry server, not the one under test.
        AbstractResponse added = server.adminHome == null
                ? send(r, add)
                : sendToSite(r, add, RemoteAdminLauncher.siteOf(server.adminHome).siteInfo);
        assertAdmin(add, added, AbstractMessage.RC_SUCCESS, "add DSA key to " + Util.decodeString(adminHandle));
    }

    protected static AuthenticationInfo auth(Auth a) {
        switch (a) {
            case SECKEY:
                return new SecretKeyAuthenticationInfo(adminHandle, SECKEY_INDEX, secret);
            case RSA:
                return new PublicKeyAuthenticationInfo(adminHandle, RSA_INDEX, rsaKey);
            case DSA:
                return new PublicKeyAuthenticationInfo(adminHandle, DSA_INDEX, dsaKeys.getPrivate());
            default:
                throw new AssertionError(a);
        }
    }

    /** A stock resolver preferring one protocol; {@code sessions=false} removes the session tracker. */
    protected static HandleResolver adminResolver(Proto p, boolean sessions) {
        HandleResolver r = newResolver();
        r.setPreferredProtocols(new int[] {p.code});
        if (!sessions) {
            r.setSessionTracker(null);
        }
        return r;
    }

    protected static AbstractResponse send(HandleResolver r, AbstractRequest req) throws HandleException {
        return r.sendRequestToServer(req, site(), serverInfo());
    }

    private static AbstractResponse sendToSite(HandleResolver r, AbstractRequest req, net.handle.hdllib.SiteInfo site)
            throws HandleException {
        return r.sendRequestToServer(req, site, site.servers[0]);
    }

    /** Sends a list request and collects the handles of every response message. */
    protected static List<String> sendList(HandleResolver r, AbstractRequest req, int[] messages) throws HandleException {
        List<String> out = new ArrayList<>();
        AbstractResponse last = r.sendRequestToServer(req, site(), serverInfo(), resp -> {
            messages[0]++;
            if (resp instanceof ListHandlesResponse) {
                for (byte[] h : ((ListHandlesResponse) resp).handles) {
                    out.add(Util.decodeString(h));
                }
            }
        });
        assertAdmin(req, last, AbstractMessage.RC_SUCCESS, "list handles");
        return out;
    }

    /**
     * Response code, op code, future expiration. (After a challenge the response carries the
     * answer's request id, not the original's, so request ids are not compared here.)
     */
    protected static void assertAdmin(AbstractRequest req, AbstractResponse resp, int code, String ctx) {
        assertNotNull(resp, ctx + ": no response");
        String d = ctx + ": " + describe(resp);
        assertEquals(code, resp.responseCode, d + " -> wrong response code");
        assertEquals(req.opCode, resp.opCode, d + " -> op code");
        assertTrue(Integer.toUnsignedLong(resp.expiration) > System.currentTimeMillis() / 1000, d + " -> expiration");
    }

    protected static HandleValue adminValue(int index, byte[] handle, int adminIndex, boolean all) {
        AdminRecord rec = all
                ? new AdminRecord(handle, adminIndex, true, true, true, true, true, true, true, true, true, true, true, true)
                : new AdminRecord(handle, adminIndex, false, false, false, false, false, false, false, false, false, false, false, true);
        return new HandleValue(index, "HS_ADMIN", Encoder.encodeAdminRecord(rec));
    }

    protected static HandleValue secretKeyValue(int index, String secretText) {
        return new HandleValue(index, Common.STD_TYPE_HSSECKEY, Util.encodeString(secretText), HandleValue.TTL_TYPE_RELATIVE,
                86400, 0, null, true, true, false, false);
    }

    protected static byte[] h(String s) {
        return Util.encodeString(s);
    }

    protected static int randomId() {
        return ThreadLocalRandom.current().nextInt(1, Integer.MAX_VALUE);
    }
}
