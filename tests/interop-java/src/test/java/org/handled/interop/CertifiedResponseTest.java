package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.PublicKey;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.Common;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.ServerInfo;
import net.handle.hdllib.Util;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Certified responses (CT → HS_SIGNED credential, SHA256withRSA with the key from the site record)
 * and request digests (RD), §1.3–§1.5. Through the site/server routes the library itself verifies
 * both (and throws if they are missing or wrong); the tests also verify by hand.
 */
class CertifiedResponseTest extends ServerTestBase {

    private static final Route[] LIBRARY_ROUTES = {Route.SITE_FORCED, Route.SITE_PREFERRED, Route.SERVER_PREFERRED};

    @ParameterizedTest
    @EnumSource(Proto.class)
    void certifiedResolutionVerifiedByLibrary(Proto proto) throws Exception {
        PublicKey key = serverInfo().getPublicKey();
        for (Route route : LIBRARY_ROUTES) {
            ResolutionRequest req = resolution(Fixtures.H1);
            req.certify = true;
            String ctx = "CT resolution of TEST/1 via " + route + "/" + proto;
            AbstractResponse resp = send(route, proto, req); // library checks the signature here
            HandleValue[] values = assertResolved(req, resp, ctx);
            assertValues(Fixtures.values(Fixtures.H1), values, ctx);
            assertSignedBy(key, resp, ctx);
        }
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void certifiedErrorResponseVerifiedByLibrary(Proto proto) throws Exception {
        PublicKey key = serverInfo().getPublicKey();
        ResolutionRequest req = resolution("TEST/no-such-handle");
        req.certify = true;
        String ctx = "CT resolution of TEST/no-such-handle via SITE_FORCED/" + proto;
        AbstractResponse resp = send(Route.SITE_FORCED, proto, req);
        assertError(req, resp, AbstractMessage.RC_HANDLE_NOT_FOUND, ctx);
        assertSignedBy(key, resp, ctx);
    }

    /** Raw sends don't know the server key: the library's check is off and we verify by hand. */
    @ParameterizedTest
    @EnumSource(Proto.class)
    void certifiedRawResponseVerifiesWithSiteKey(Proto proto) throws Exception {
        PublicKey key = serverInfo().getPublicKey();
        HandleResolver r = newResolver();
        r.setCheckSignatures(false);
        ResolutionRequest req = resolution(Fixtures.H2);
        req.certify = true;
        String ctx = "CT resolution of TEST/2 via RAW/" + proto;
        AbstractResponse resp = send(r, Route.RAW, proto, req);
        assertValues(Fixtures.values(Fixtures.H2), assertResolved(req, resp, ctx), ctx);
        assertSignedBy(key, resp, ctx);
    }

    /** Guards the positive tests: with another key in the ServerInfo the library must refuse. */
    @ParameterizedTest
    @EnumSource(Proto.class)
    void libraryRejectsSignatureUnderWrongKey(Proto proto) throws Exception {
        KeyPairGenerator kpg = KeyPairGenerator.getInstance("RSA");
        kpg.initialize(2048);
        ServerInfo wrong = serverInfo().cloneServerInfo();
        wrong.publicKey = Util.getBytesFromPublicKey(kpg.generateKeyPair().getPublic());
        HandleResolver r = newResolver();
        r.setPreferredProtocols(new int[] {proto.code});
        ResolutionRequest req = resolution(Fixtures.H1);
        req.certify = true;
        HandleException e = assertThrows(HandleException.class, () -> r.sendRequestToServer(req, site(), wrong),
                "library accepted a certified response checked against a key that isn't the server's");
        assertEquals(HandleException.MISSING_OR_INVALID_SIGNATURE, e.getCode(), "unexpected failure: " + e);
    }

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void requestDigest(Route route, Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.H1);
        req.returnRequestDigest = true;
        String ctx = "RD resolution of TEST/1 via " + route + "/" + proto;
        AbstractResponse resp = send(route, proto, req); // library compares the digest itself
        assertValues(Fixtures.values(Fixtures.H1), assertResolved(req, resp, ctx), ctx);
        assertDigestOf(req, resp, ctx);
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void requestDigestOnErrorResponses(Proto proto) throws Exception {
        Object[][] cases = {
            {"TEST/no-such-handle", AbstractMessage.RC_HANDLE_NOT_FOUND},
            {"OTHER/x", AbstractMessage.RC_SERVER_NOT_RESP},
        };
        for (Route route : new Route[] {Route.SITE_FORCED, Route.RAW}) {
            for (Object[] c : cases) {
                ResolutionRequest req = resolution((String) c[0]);
                req.returnRequestDigest = true;
                String ctx = "RD resolution of " + c[0] + " via " + route + "/" + proto;
                AbstractResponse resp = send(route, proto, req);
                assertError(req, resp, (Integer) c[1], ctx);
                assertDigestOf(req, resp, ctx);
            }
        }
    }

    /** AT + CT + RD together, as in the certified-request vector (PO left on). */
    @ParameterizedTest
    @EnumSource(Proto.class)
    void authoritativeCertifiedWithDigest(Proto proto) throws Exception {
        PublicKey key = serverInfo().getPublicKey();
        ResolutionRequest req = resolution(Fixtures.H1, null, new int[] {1, 2});
        req.authoritative = true;
        req.certify = true;
        req.returnRequestDigest = true;
        String ctx = "AT+CT+RD resolution via SITE_FORCED/" + proto;
        AbstractResponse resp = send(Route.SITE_FORCED, proto, req);
        assertValues(Fixtures.valuesWithIndexes(Fixtures.H1, 1, 2), assertResolved(req, resp, ctx), ctx);
        assertDigestOf(req, resp, ctx);
        assertSignedBy(key, resp, ctx);
        assertTrue(resp.authoritative, ctx + ": AT should be set in the response of a primary site: " + describe(resp));
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void certifiedGetSiteInfo(Proto proto) throws Exception {
        PublicKey key = serverInfo().getPublicKey();
        HandleResolver r = newResolver();
        r.setCheckSignatures(false);
        var req = siteInfoRequest();
        req.certify = true;
        AbstractResponse resp = proto.sendRaw(r, req, server);
        String ctx = "CT GET_SITE_INFO via RAW/" + proto;
        assertResponse(req, resp, AbstractMessage.RC_SUCCESS, ctx);
        assertSignedBy(key, resp, ctx);
    }

    private static void assertSignedBy(PublicKey key, AbstractResponse resp, String ctx) throws Exception {
        assertTrue(resp.certify, ctx + ": CT flag should be copied into the response: " + describe(resp));
        assertNotNull(resp.signature, ctx + ": response carries no credential");
        assertTrue(resp.signature.length > 0, ctx + ": response carries an empty credential");
        assertFalse(resp.signatureIsMac(), ctx + ": expected HS_SIGNED, got a MAC");
        String[] typeAndAlg = credentialTypeAndHash(resp.signature);
        assertEquals("HS_SIGNED", typeAndAlg[0], ctx + ": credential type");
        if (resp.hasEqualOrGreaterVersion(2, 7)) {
            assertEquals("SHA-256", typeAndAlg[1], ctx + ": hash for response version >= 2.7");
        }
        assertTrue(resp.verifyMessage(key), ctx + ": signature does not verify with the site record's key ("
                + typeAndAlg[1] + ", response " + describe(resp) + ")");
    }

    private static void assertDigestOf(ResolutionRequest req, AbstractResponse resp, String ctx) throws Exception {
        assertTrue(resp.returnRequestDigest, ctx + ": RD flag should be set in the response: " + describe(resp));
        assertNotNull(resp.requestDigest, ctx + ": response has no request digest");
        if (resp.hasEqualOrGreaterVersion(2, 7)) {
            assertEquals(Common.HASH_CODE_SHA256, resp.rdHashType, ctx + ": digest hash code for response version >= 2.7");
        }
        byte[] body = req.getEncodedMessageBody(); // header + body exactly as sent
        String alg = resp.rdHashType == Common.HASH_CODE_SHA256 ? "SHA-256"
                : resp.rdHashType == Common.HASH_CODE_SHA1 ? "SHA-1" : "MD5";
        assertArrayEquals(MessageDigest.getInstance(alg).digest(body), resp.requestDigest,
                ctx + ": request digest (" + alg + ") doesn't match the request sent");
    }

    /** Credential: u8 version, u8 reserved, u16 flags, bytes signer, i32 counter, utf8 type, i32 len, utf8 hash, bytes sig. */
    static String[] credentialTypeAndHash(byte[] cred) throws HandleException {
        int off = 4;
        byte[] signer = Encoder.readByteArray(cred, off);
        off += 4 + signer.length + 4;
        byte[] type = Encoder.readByteArray(cred, off);
        off += 4 + type.length + 4;
        byte[] hash = Encoder.readByteArray(cred, off);
        return new String[] {new String(type, StandardCharsets.UTF_8), new String(hash, StandardCharsets.UTF_8)};
    }
}
