package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractRequest;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.ErrorResponse;
import net.handle.hdllib.GenericRequest;
import net.handle.hdllib.GetSiteInfoResponse;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.ResolutionResponse;
import net.handle.hdllib.ServerInfo;
import net.handle.hdllib.SiteInfo;
import net.handle.hdllib.Util;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.provider.Arguments;
import org.opentest4j.AssertionFailedError;

/**
 * Starts one {@code handled} per test class (see {@link HandledServer}), fetches its site record
 * over TCP, and offers the helpers the tests share. The server is killed in {@link #stopServer}
 * even when tests fail; if it died on its own while the class ran, that is reported as a failure.
 */
public abstract class ServerTestBase {
    /** Resolver timeouts: TCP/HTTP connect+read, and the UDP retry scheme (ms per try). */
    public static final int TCP_TIMEOUT_MS = 5000;
    public static final int[] UDP_RETRY_MS = {1000, 2000};

    static {
        NetworkGuard.install();
    }

    protected static HandledServer server;
    private static SiteInfo site;
    private static Throwable siteError;

    @BeforeAll
    static void startServer(TestInfo info) throws Exception {
        String name = info.getTestClass().map(Class::getSimpleName).orElse("interop");
        Path dir = Files.createTempDirectory(HandledServer.workRoot(), name + "-");
        Path importFile = Fixtures.writeImportFile(dir);
        server = HandledServer.start(name, dir, importFile);
        site = null;
        siteError = null;
        try {
            site = fetchSiteInfo(Proto.TCP, newResolver()).siteInfo;
        } catch (Throwable t) {
            siteError = t;
        }
    }

    @AfterAll
    static void stopServer() {
        HandledServer s = server;
        server = null;
        site = null;
        siteError = null;
        if (s == null) {
            return;
        }
        Integer exit = s.exitCode();
        s.close();
        if (exit != null) {
            fail("handled exited by itself (code " + exit + ") while the tests ran; stderr "
                    + s.stderrLog + " ends with:\n" + s.stderrTail());
        }
    }

    /** The site record the server answered to GET_SITE_INFO over TCP at start-up. */
    protected static SiteInfo site() {
        if (site == null) {
            throw new AssertionError("no site info: GET_SITE_INFO over TCP failed at start-up, so "
                    + "site-based requests can't be made (see SiteInfoTest)", siteError);
        }
        return site;
    }

    /** The (single) server entry of {@link #site()}. */
    protected static ServerInfo serverInfo() {
        SiteInfo s = site();
        assertNotNull(s.servers, "site has no server list");
        assertEquals(1, s.servers.length, "site should list exactly one server: " + s);
        return s.servers[0];
    }

    /**
     * A resolver as a stock client would have it, but with root-info auto-update off and short
     * timeouts. (The JVM-wide client config dir is target/handle-client-config, set by the pom.)
     */
    protected static HandleResolver newResolver() {
        HandleResolver r = new HandleResolver();
        r.getConfiguration().setAutoUpdateRootInfo(false);
        r.setTcpTimeout(TCP_TIMEOUT_MS);
        r.setUdpRetryScheme(UDP_RETRY_MS);
        r.setUseIPv6FastFallback(false);
        return r;
    }

    protected static GenericRequest siteInfoRequest() {
        return new GenericRequest(Util.encodeString("/"), AbstractMessage.OC_GET_SITE_INFO, null);
    }

    protected static GetSiteInfoResponse fetchSiteInfo(Proto p, HandleResolver r) throws HandleException {
        GenericRequest req = siteInfoRequest();
        AbstractResponse resp = p.sendRaw(r, req, server);
        assertResponse(req, resp, AbstractMessage.RC_SUCCESS, "GET_SITE_INFO over " + p);
        return assertInstanceOf(GetSiteInfoResponse.class, resp, "GET_SITE_INFO over " + p);
    }

    /** A resolution request as HandleResolver.resolveHandle builds it (PO, REC, CA set). */
    protected static ResolutionRequest resolution(String handle, String[] types, int[] indexes) {
        String[] t = types == null ? new String[0] : types;
        byte[][] tb = new byte[t.length][];
        for (int i = 0; i < t.length; i++) {
            tb[i] = Util.encodeString(t[i]);
        }
        return new ResolutionRequest(Util.encodeString(handle), tb, indexes == null ? new int[0] : indexes, null);
    }

    protected static ResolutionRequest resolution(String handle) {
        return resolution(handle, null, null);
    }

    /** Sends {@code req} by {@code route} over {@code proto} with a fresh resolver. */
    protected static AbstractResponse send(Route route, Proto proto, AbstractRequest req) throws HandleException {
        return send(newResolver(), route, proto, req);
    }

    protected static AbstractResponse send(HandleResolver r, Route route, Proto proto, AbstractRequest req)
            throws HandleException {
        AbstractResponse resp;
        try {
            resp = sendUnchecked(r, route, proto, req);
        } catch (HandleException e) {
            throw new AssertionFailedError(route + "/" + proto + " " + describe(req)
                    + ": the client library threw " + e, e);
        }
        assertNotNull(resp, "client returned no response for " + route + "/" + proto
                + " (null means: the site has no usable " + proto + " interface for this request)");
        return resp;
    }

    private static AbstractResponse sendUnchecked(HandleResolver r, Route route, Proto proto, AbstractRequest req)
            throws HandleException {
        AbstractResponse resp;
        switch (route) {
            case SITE_FORCED:
                resp = r.sendRequestToSite(req, site(), proto.code);
                break;
            case SITE_PREFERRED:
                r.setPreferredProtocols(new int[] {proto.code});
                resp = r.sendRequestToSite(req, site());
                break;
            case SERVER_PREFERRED:
                r.setPreferredProtocols(new int[] {proto.code});
                resp = r.sendRequestToServer(req, site(), serverInfo());
                break;
            case RAW:
                resp = proto.sendRaw(r, req, server);
                break;
            default:
                throw new AssertionError(route);
        }
        return resp;
    }

    /** Every route x every protocol. */
    protected static Stream<Arguments> routesAndProtocols() {
        List<Arguments> out = new ArrayList<>();
        for (Route r : Route.values()) {
            for (Proto p : Proto.values()) {
                out.add(Arguments.of(r, p));
            }
        }
        return out.stream();
    }

    /**
     * Checks what every response must satisfy: response code, op code copied, request id echoed,
     * expiration in the future, protocol major version 2.
     */
    protected static void assertResponse(AbstractRequest req, AbstractResponse resp, int expectedCode, String ctx) {
        assertNotNull(resp, ctx + ": no response");
        String d = ctx + ": " + describe(resp);
        assertEquals(expectedCode, resp.responseCode, d + " -> wrong response code");
        assertEquals(req.opCode, resp.opCode, d + " -> op code not copied from request");
        assertEquals(req.requestId, resp.requestId, d + " -> request id not echoed");
        long now = System.currentTimeMillis() / 1000;
        assertTrue(Integer.toUnsignedLong(resp.expiration) > now,
                d + " -> expiration " + Integer.toUnsignedLong(resp.expiration) + " not after now " + now);
        assertEquals(2, resp.majorProtocolVersion, d + " -> response major version");
    }

    /** Asserts a successful resolution response for {@code req} and returns its values. */
    protected static HandleValue[] assertResolved(AbstractRequest req, AbstractResponse resp, String ctx)
            throws HandleException {
        assertResponse(req, resp, AbstractMessage.RC_SUCCESS, ctx);
        ResolutionResponse rr = assertInstanceOf(ResolutionResponse.class, resp, ctx);
        assertEquals(Util.decodeString(req.handle), Util.decodeString(rr.handle),
                ctx + ": response handle must echo the request's spelling");
        HandleValue[] values = rr.getHandleValues();
        assertNotNull(values, ctx + ": no values");
        return values;
    }

    /** Asserts an error response with {@code code} (an ErrorResponse with a decodable message). */
    protected static ErrorResponse assertError(AbstractRequest req, AbstractResponse resp, int code, String ctx) {
        assertResponse(req, resp, code, ctx);
        return assertInstanceOf(ErrorResponse.class, resp, ctx + ": error body should decode as an error message");
    }

    /**
     * Compares values field by field (index, type, data, TTL type and value, the four permission
     * bits, references), in order; timestamps are checked separately.
     */
    protected static void assertValues(HandleValue[] expected, HandleValue[] actual, String ctx) {
        String listing = "\nexpected: " + list(expected) + "\nactual:   " + list(actual);
        assertEquals(expected.length, actual.length, ctx + ": number of values" + listing);
        for (int i = 0; i < expected.length; i++) {
            HandleValue e = expected[i];
            HandleValue a = actual[i];
            String where = ctx + ": value #" + i + " (expected index " + e.getIndex() + ")";
            assertEquals(e.getIndex(), a.getIndex(), where + " index" + listing);
            assertEquals(e.getTypeAsString(), a.getTypeAsString(), where + " type");
            assertTrue(Arrays.equals(e.getData(), a.getData()), where + " data differs: expected "
                    + shortHex(e.getData()) + " got " + shortHex(a.getData()));
            assertEquals(e.getTTLType(), a.getTTLType(), where + " ttl type (0 relative, 1 absolute)");
            assertEquals(e.getTTL(), a.getTTL(), where + " ttl");
            assertEquals(e.getPermissionString(), a.getPermissionString(),
                    where + " permissions (admin read/write, public read/write)");
            int refs = a.getReferences() == null ? 0 : a.getReferences().length;
            assertEquals(0, refs, where + " references");
        }
    }

    protected static String describe(AbstractMessage m) {
        if (m == null) {
            return "null";
        }
        String extra = "";
        if (m instanceof ErrorResponse) {
            byte[] msg = ((ErrorResponse) m).message;
            extra = " message=\"" + (msg == null ? "" : Util.decodeString(msg)) + "\"";
        }
        if (m instanceof AbstractRequest) {
            extra += " handle=\"" + Util.decodeString(((AbstractRequest) m).handle) + "\"";
        }
        return m.getClass().getSimpleName() + "{rc=" + m.responseCode + " op=" + m.opCode
                + " reqId=" + m.requestId + " v" + m.majorProtocolVersion + "." + m.minorProtocolVersion
                + " suggest " + m.suggestMajorProtocolVersion + "." + m.suggestMinorProtocolVersion
                + " exp=" + Integer.toUnsignedLong(m.expiration) + " serial=" + m.siteInfoSerial
                + " CT=" + m.certify + " RD=" + m.returnRequestDigest + " PO=" + m.ignoreRestrictedValues
                + extra + "} " + m;
    }

    protected static String list(HandleValue[] values) {
        StringBuilder sb = new StringBuilder("[");
        for (HandleValue v : values) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append(v.getIndex()).append(':').append(v.getTypeAsString())
                    .append(" ttl=").append(v.getTTLType() == 1 ? "abs " : "").append(v.getTTL())
                    .append(" perm=").append(v.getPermissionString())
                    .append(" data=").append(shortHex(v.getData()));
        }
        return sb.append(']').toString();
    }

    protected static String shortHex(byte[] b) {
        if (b == null) {
            return "null";
        }
        String h = HexFormat.of().formatHex(b, 0, Math.min(b.length, 48));
        return b.length > 48 ? h + "...(" + b.length + " bytes)" : h;
    }

    protected static int[] indexesOf(HandleValue[] values) {
        return Arrays.stream(values).mapToInt(HandleValue::getIndex).toArray();
    }
}
