package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.Common;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.MessageEnvelope;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.ResolutionResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Messages larger than one datagram (§4.1): responses cut into 492-byte chunks that the client
 * reassembles by sequence number, and multi-datagram requests the server must reassemble.
 */
class UdpMultiDatagramTest extends ServerTestBase {

    @ParameterizedTest
    @MethodSource("org.handled.interop.ServerTestBase#routesAndProtocols")
    void largeValuesResolve(Route route, Proto proto) throws Exception {
        ResolutionRequest req = resolution(Fixtures.BIG);
        String ctx = "TEST/BIG (3000-byte URL + 2500-byte blob) via " + route + "/" + proto;
        HandleValue[] values = assertResolved(req, send(route, proto, req), ctx);
        assertValues(Fixtures.values(Fixtures.BIG), values, ctx);
    }

    /**
     * Looks at the datagrams themselves: each <= 512 bytes, 492-byte chunks, sequence numbers.
     * A try that lost a datagram is made again under a new request id (up to 5), so one
     * datagram lost on a busy machine is no failure; every problem seen counts.
     */
    @Test
    void responseDatagramsAre492ByteChunks() throws Exception {
        Map<Integer, byte[]> chunks = new TreeMap<>();
        List<String> problems = new ArrayList<>();
        int total = -1;
        int expectedChunks = -1;
        MessageEnvelope first = null;
        ResolutionRequest req = null;
        for (int attempt = 0; attempt < 5 && (first == null || chunks.size() < expectedChunks); attempt++) {
            req = resolution(Fixtures.BIG);
            req.requestId = 0x13572468 + attempt;
            req.majorProtocolVersion = 2;
            req.minorProtocolVersion = 10;
            byte[] msg = req.getEncodedMessage();
            MessageEnvelope env = new MessageEnvelope();
            env.protocolMajorVersion = 2;
            env.protocolMinorVersion = 10;
            env.requestId = req.requestId;
            env.messageLength = msg.length;
            byte[] pkt = new byte[Common.MESSAGE_ENVELOPE_SIZE + msg.length];
            Encoder.encodeEnvelope(env, pkt);
            System.arraycopy(msg, 0, pkt, Common.MESSAGE_ENVELOPE_SIZE, msg.length);
            chunks.clear();
            total = -1;
            expectedChunks = -1;
            first = null;
            try (DatagramSocket sock = new DatagramSocket()) {
                sock.setSoTimeout(2000);
                sock.send(new DatagramPacket(pkt, pkt.length, HandledServer.LOOPBACK, server.port));
                long deadline = System.currentTimeMillis() + 5000;
                while ((expectedChunks < 0 || chunks.size() < expectedChunks) && System.currentTimeMillis() < deadline) {
                    DatagramPacket in = new DatagramPacket(new byte[4096], 4096);
                    try {
                        sock.receive(in);
                    } catch (SocketTimeoutException e) {
                        break;
                    }
                    byte[] d = java.util.Arrays.copyOf(in.getData(), in.getLength());
                    if (d.length > 512) {
                        problems.add("datagram of " + d.length + " bytes (> 512)");
                    }
                    MessageEnvelope e = new MessageEnvelope();
                    Encoder.decodeEnvelope(d, e);
                    if (e.requestId != req.requestId) {
                        problems.add("datagram with request id " + e.requestId + " (asked " + req.requestId + ")");
                        continue;
                    }
                    if (first == null) {
                        first = e;
                        total = e.messageLength;
                        expectedChunks = (total + 491) / 492;
                    } else if (e.messageLength != total) {
                        problems.add("chunk " + e.messageId + " says message length " + e.messageLength + ", first said " + total);
                    }
                    if (chunks.put(e.messageId, java.util.Arrays.copyOfRange(d, 20, d.length)) != null) {
                        problems.add("sequence number " + e.messageId + " received twice");
                    }
                }
            }
        }
        assertNotNull(first, "no UDP response at all");
        assertTrue(total > 492, "response should need several datagrams, message length " + total);
        assertEquals(expectedChunks, chunks.size(), "chunks received " + chunks.keySet() + " for message length " + total
                + " (expected sequence numbers 0.." + (expectedChunks - 1) + ")");
        byte[] whole = new byte[total];
        for (Map.Entry<Integer, byte[]> c : chunks.entrySet()) {
            int k = c.getKey();
            int want = k == expectedChunks - 1 ? total - 492 * k : 492;
            if (k < 0 || k >= expectedChunks) {
                problems.add("sequence number " + k + " out of range");
                continue;
            }
            if (c.getValue().length != want) {
                problems.add("chunk " + k + " carries " + c.getValue().length + " bytes, expected " + want);
                continue;
            }
            System.arraycopy(c.getValue(), 0, whole, 492 * k, want);
        }
        if (!problems.isEmpty()) {
            fail("UDP chunking problems: " + problems);
        }
        AbstractMessage m = Encoder.decodeMessage(whole, 0, first);
        assertResponse(req, assertInstanceOf(ResolutionResponse.class, m), AbstractMessage.RC_SUCCESS, "reassembled UDP response");
        assertValues(Fixtures.values(Fixtures.BIG), ((ResolutionResponse) m).getHandleValues(), "reassembled UDP response");
    }

    /** A request over 492 bytes goes out as several datagrams (truncated bit, sequence numbers). */
    @ParameterizedTest
    @EnumSource(value = Route.class, names = {"SITE_FORCED", "RAW"})
    void multiDatagramRequest(Route route) throws Exception {
        String[] types = new String[51];
        types[0] = "URL";
        for (int i = 1; i < types.length; i++) {
            types[i] = String.format("X-FILLER-TYPE-%02d", i);
        }
        ResolutionRequest req = resolution(Fixtures.H1, types, new int[] {2});
        req.majorProtocolVersion = 2;
        req.minorProtocolVersion = 10;
        int len = req.getEncodedMessage().length;
        assertTrue(len > 492, "test premise: request must not fit one datagram, is " + len + " bytes");
        req.clearBuffers();
        String ctx = "TEST/1 with a " + len + "-byte request via " + route + "/UDP";
        HandleValue[] values = assertResolved(req, send(route, Proto.UDP, req), ctx);
        assertArrayEquals(new int[] {1, 2}, indexesOf(values), ctx + ": " + list(values));
    }
}
