package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.stream.Stream;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ResolutionRequest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Resolution (op 1) through the client library's site/server machinery and its raw sends, each
 * forced onto one protocol: values, filters (§3.3, §2.3) and handle case (§7.3).
 */
class ResolutionTest extends ServerTestBase {

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void resolvesAllValues(Route route, Proto proto) throws Exception {
        for (String h : new String[] {Fixtures.H1, Fixtures.H2, Fixtures.ABC}) {
            ResolutionRequest req = resolution(h);
            AbstractResponse resp = send(route, proto, req);
            HandleValue[] values = assertResolved(req, resp, h + " via " + route + "/" + proto);
            assertValues(Fixtures.values(h), values, h + " via " + route + "/" + proto);
        }
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void valuesCarryServerTimestamps(Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.H1);
        HandleValue[] values = assertResolved(req, send(Route.SITE_FORCED, proto, req), "TEST/1 over " + proto);
        long now = System.currentTimeMillis() / 1000;
        for (HandleValue v : values) {
            long ts = Integer.toUnsignedLong(v.getTimestamp());
            assertTrue(ts > 0 && ts <= now + 300,
                    "value " + v.getIndex() + " timestamp " + ts + " should be set by the server (now=" + now + ")");
        }
    }

    /**
     * Header fields of a plain (PO, REC, CA) resolution answer, as the Java server sets them
     * (§1.2, §1.3, §1.7): PO and CA copied, REC set, AT set on a primary site, CT/RD not set,
     * the site's serial, version min(request's suggested 2.11, the site's version).
     */
    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void responseHeaderFields(Route route, Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.H2);
        AbstractResponse resp = send(route, proto, req);
        String ctx = "TEST/2 via " + route + "/" + proto + ": " + describe(resp);
        assertResolved(req, resp, ctx);
        assertTrue(resp.ignoreRestrictedValues, ctx + " -> PO should be copied from the request");
        assertTrue(resp.cacheCertify, ctx + " -> CA should be copied from the request");
        assertTrue(resp.recursive, ctx + " -> REC is always set in Java server responses");
        assertTrue(resp.authoritative, ctx + " -> AT should be set by a primary site");
        assertFalse(resp.certify, ctx + " -> CT was not requested");
        assertFalse(resp.returnRequestDigest, ctx + " -> RD was not requested");
        assertFalse(resp.continuous, ctx + " -> CN on a single-message answer");
        assertEquals(site().serialNumber, resp.siteInfoSerial, ctx + " -> site serial in the header");
        assertEquals(Math.min(11, site().minorProtocolVersion), resp.minorProtocolVersion,
                ctx + " -> response minor version should be min(2.11 suggested, site's version)");
        assertTrue(resp.suggestMinorProtocolVersion >= resp.minorProtocolVersion,
                ctx + " -> suggested version below the version used");
    }

    static Stream<Arguments> filters() {
        // handle, types, indexes, expected indexes (stored order)
        return Stream.of(
                Arguments.of("index 2", new String[0], new int[] {2}, new int[] {2}),
                Arguments.of("indexes 1,4", new String[0], new int[] {4, 1}, new int[] {1, 4}),
                Arguments.of("type URL (exact, not URL.alt)", new String[] {"URL"}, new int[0], new int[] {1}),
                Arguments.of("type url (case-insensitive)", new String[] {"url"}, new int[0], new int[] {1}),
                Arguments.of("type URL. (family)", new String[] {"URL."}, new int[0], new int[] {1, 3, 6}),
                Arguments.of("type URL.alt (exact subtype)", new String[] {"URL.alt"}, new int[0], new int[] {3}),
                Arguments.of("type url.ALT (exact subtype, case)", new String[] {"url.ALT"}, new int[0], new int[] {3}),
                Arguments.of("types EMAIL, CUSTOM", new String[] {"EMAIL", "CUSTOM"}, new int[0], new int[] {2, 4}),
                Arguments.of("type HS_ADMIN", new String[] {"HS_ADMIN"}, new int[0], new int[] {100}),
                Arguments.of("index 2 + type URL (union)", new String[] {"URL"}, new int[] {2}, new int[] {1, 2}),
                Arguments.of("index 1 + type URL (overlap)", new String[] {"URL"}, new int[] {1}, new int[] {1}),
                Arguments.of("index 100 + type URL. (union)", new String[] {"URL."}, new int[] {100}, new int[] {1, 3, 6, 100}),
                Arguments.of("index 99 + type EMAIL (one part matches)", new String[] {"EMAIL"}, new int[] {99}, new int[] {2}));
    }

    static Stream<Arguments> filtersByProtocol() {
        return filters().flatMap(a -> Stream.of(Proto.values()).map(p -> {
            Object[] x = a.get();
            return Arguments.of(p, x[0], x[1], x[2], x[3]);
        }));
    }

    @ParameterizedTest
    @MethodSource("filtersByProtocol")
    void filters(Proto proto, String label, String[] types, int[] indexes, int[] expected) throws Exception {
        ResolutionRequest req = resolution(Fixtures.H1, types, indexes);
        String ctx = "TEST/1 filtered by " + label + " over " + proto;
        HandleValue[] values = assertResolved(req, send(Route.SITE_FORCED, proto, req), ctx);
        assertArrayEquals(expected, indexesOf(values), ctx + ": indexes returned " + list(values));
        assertValues(Fixtures.valuesWithIndexes(Fixtures.H1, expected), values, ctx);
    }

    static Stream<Arguments> spellings() {
        return Stream.of(
                Arguments.of("test/abc", Fixtures.ABC),
                Arguments.of("Test/Abc", Fixtures.ABC),
                Arguments.of("TEST/abc", Fixtures.ABC),
                Arguments.of("test/ABC", Fixtures.ABC),
                Arguments.of("tEsT/1", Fixtures.H1));
    }

    static Stream<Arguments> spellingsByRouteAndProtocol() {
        return spellings().flatMap(a -> routesAndProtocols().map(rp -> {
            Object[] x = a.get();
            Object[] y = rp.get();
            return Arguments.of(y[0], y[1], x[0], x[1]);
        }));
    }

    /** Handles are case-insensitive; the response echoes the caller's spelling. */
    @ParameterizedTest
    @MethodSource("spellingsByRouteAndProtocol")
    void handlesAreCaseInsensitive(Route route, Proto proto, String asked, String stored) throws Exception {
        ResolutionRequest req = resolution(asked);
        String ctx = asked + " (stored as " + stored + ") via " + route + "/" + proto;
        HandleValue[] values = assertResolved(req, send(route, proto, req), ctx);
        assertValues(Fixtures.values(stored), values, ctx);
    }
}
