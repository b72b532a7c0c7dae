package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertTrue;

import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ResolutionRequest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Public-only (PO) resolution, the client default: values without the public-read bit (here an
 * HS_SECKEY with permissions 1100) are never returned, and a PO request whose filter only matches
 * such values gets 200 (§3.3).
 */
class PublicOnlyTest extends ServerTestBase {

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void defaultResolutionOmitsNonPublicValues(Route route, Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.SECRET);
        assertTrue(req.ignoreRestrictedValues, "test premise: library requests are public-only by default");
        String ctx = "TEST/SECRET via " + route + "/" + proto;
        HandleValue[] values = assertResolved(req, send(route, proto, req), ctx);
        assertValues(Fixtures.valuesWithIndexes(Fixtures.SECRET, 1), values, ctx + " (HS_SECKEY at 300 must be hidden)");
    }

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void filterMatchingOnlyNonPublicValuesIs200(Route route, Proto proto) throws Exception {
        Object[][] cases = {
            {Fixtures.SECRET, "index 300", new String[0], new int[] {300}},
            {Fixtures.SECRET, "type HS_SECKEY", new String[] {"HS_SECKEY"}, new int[0]},
            {Fixtures.ONLY_SECRET, "no filter", new String[0], new int[0]},
        };
        for (Object[] c : cases) {
            ResolutionRequest req = resolution((String) c[0], (String[]) c[2], (int[]) c[3]);
            assertError(req, send(route, proto, req), AbstractMessage.RC_VALUES_NOT_FOUND,
                    c[0] + " " + c[1] + " (public-only) via " + route + "/" + proto);
        }
    }

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void filterMixingPublicAndNonPublicReturnsOnlyPublic(Route route, Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.SECRET, new String[] {"HS_SECKEY", "URL"}, new int[] {300});
        String ctx = "TEST/SECRET filtered to HS_SECKEY/URL/300 via " + route + "/" + proto;
        HandleValue[] values = assertResolved(req, send(route, proto, req), ctx);
        assertValues(Fixtures.valuesWithIndexes(Fixtures.SECRET, 1), values, ctx);
    }
}
