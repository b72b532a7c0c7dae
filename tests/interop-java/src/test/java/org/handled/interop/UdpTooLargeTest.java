package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.ErrorResponse;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.Interface;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.Util;
import org.junit.jupiter.api.Test;

/**
 * An answer over the server's UDP limit ({@code udp_max_response_bytes}, 8192 bytes by default)
 * comes back over UDP as one short RC 500 "ask over TCP" (issue 13, F15: a 71-byte request had
 * brought back 257 KB). The stock resolver treats a 500 to a request without a session as a
 * failure of that protocol and moves on to TCP, so it still gets the whole record.
 */
class UdpTooLargeTest extends ServerTestBase {

    @Test
    void resolverMovesOnToTcp() throws Exception {
        HandleResolver r = newResolver();
        r.setPreferredProtocols(new int[] {Interface.SP_HDL_UDP, Interface.SP_HDL_TCP});
        ResolutionRequest req = resolution(Fixtures.HUGE);
        AbstractResponse resp = r.sendRequestToServer(req, site(), serverInfo());
        String ctx = "TEST/HUGE (" + Fixtures.HUGE_VALUES + " values of 1,000 bytes), UDP then TCP preferred";
        HandleValue[] values = assertResolved(req, resp, ctx);
        assertValues(Fixtures.values(Fixtures.HUGE), values, ctx);
    }

    @Test
    void overUdpAloneTheAnswerIsTheRefusal() throws Exception {
        ResolutionRequest req = resolution(Fixtures.HUGE);
        AbstractResponse resp = Proto.UDP.sendRaw(newResolver(), req, server);
        assertEquals(AbstractMessage.RC_SESSION_TIMEOUT, resp.responseCode, String.valueOf(resp));
        String message = Util.decodeString(assertInstanceOf(ErrorResponse.class, resp).message);
        assertTrue(message.contains("ask over TCP"), message);
    }
}
