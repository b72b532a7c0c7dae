package org.handled.interop;

import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.ResolutionRequest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/** Resolution error codes (§3.2, §3.3): 100 not found, 301 prefix not homed, 200 no value matched. */
class ErrorCodeTest extends ServerTestBase {

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void unknownHandleUnderHomedPrefixIs100(Route route, Proto proto) throws Exception {
        for (String h : new String[] {"TEST/does-not-exist", "test/does-not-exist", "TEST/"}) {
            ResolutionRequest req = resolution(h);
            assertError(req, send(route, proto, req), AbstractMessage.RC_HANDLE_NOT_FOUND,
                    h + " via " + route + "/" + proto);
        }
    }

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void prefixNotHomedIs301(Route route, Proto proto) throws Exception {
        for (String h : new String[] {"OTHER/x", "other/1", "TESTX/1"}) {
            ResolutionRequest req = resolution(h);
            assertError(req, send(route, proto, req), AbstractMessage.RC_SERVER_NOT_RESP,
                    h + " via " + route + "/" + proto);
        }
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void filterMatchingNothingIs200(Proto proto) throws Exception {
        Object[][] cases = {
            {"index 99", new String[0], new int[] {99}},
            {"type NOPE", new String[] {"NOPE"}, new int[0]},
            {"type URL.nope", new String[] {"URL.nope"}, new int[0]},
            {"index 99 + type NOPE", new String[] {"NOPE"}, new int[] {99}},
        };
        for (Route route : new Route[] {Route.SITE_FORCED, Route.RAW}) {
            for (Object[] c : cases) {
                ResolutionRequest req = resolution(Fixtures.H1, (String[]) c[1], (int[]) c[2]);
                assertError(req, send(route, proto, req), AbstractMessage.RC_VALUES_NOT_FOUND,
                        "TEST/1 filtered by " + c[0] + " via " + route + "/" + proto);
            }
        }
    }
}
