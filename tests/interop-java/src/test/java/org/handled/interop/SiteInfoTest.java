package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.security.PublicKey;
import java.util.Set;
import java.util.TreeSet;
import net.handle.apps.simple.SiteInfoConverter;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.GenericRequest;
import net.handle.hdllib.GetSiteInfoResponse;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.Interface;
import net.handle.hdllib.ServerInfo;
import net.handle.hdllib.SiteInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** GET_SITE_INFO (op 2) straight to the address over UDP, TCP and the HTTP tunnel (§3.4, §6.3). */
class SiteInfoTest extends ServerTestBase {

    @ParameterizedTest
    @EnumSource(Proto.class)
    void getSiteInfoDescribesThisServer(Proto p) throws Exception {
        HandleResolver r = newResolver();
        GenericRequest req = siteInfoRequest();
        AbstractResponse raw = p.sendRaw(r, req, server);
        assertResponse(req, raw, AbstractMessage.RC_SUCCESS, "GET_SITE_INFO over " + p);
        GetSiteInfoResponse resp = assertInstanceOf(GetSiteInfoResponse.class, raw);
        SiteInfo s = resp.siteInfo;
        assertNotNull(s, "no site record decoded");
        String ctx = "site over " + p + ": " + s;

        assertEquals(1, s.dataFormatVersion, ctx + " data format version");
        assertEquals(2, s.majorProtocolVersion, ctx + " protocol major");
        assertTrue(s.minorProtocolVersion >= 10, ctx + " protocol minor should be >= 10 (Handle.Net 9 speaks 2.10/2.11)");
        assertTrue(s.isPrimary, ctx + " must be a primary site (admin/AT requests skip non-primaries)");
        assertEquals(s.serialNumber, resp.siteInfoSerial, ctx + " response header serial should be the site's serial");

        assertNotNull(s.servers, ctx);
        assertEquals(1, s.servers.length, ctx + " number of servers");
        ServerInfo srv = s.servers[0];
        byte[] v4in16 = new byte[16];
        v4in16[12] = 127;
        v4in16[15] = 1;
        assertArrayEquals(v4in16, srv.ipAddress, ctx + " address must be 127.0.0.1 as 12 zero bytes + 4 (not ::ffff:-mapped)");
        assertEquals("127.0.0.1", srv.getInetAddress().getHostAddress(), ctx);

        assertNotNull(srv.publicKey, ctx + " server entry carries no public key");
        assertTrue(srv.publicKey.length > 0, ctx + " server entry carries an empty public key");
        PublicKey pk = srv.getPublicKey();
        assertEquals("RSA", pk.getAlgorithm(), ctx + " server key algorithm");

        Set<String> expected = new TreeSet<>(Set.of(
                iface(Interface.SP_HDL_UDP, Interface.ST_QUERY, server.port),
                iface(Interface.SP_HDL_TCP, Interface.ST_ADMIN_AND_QUERY, server.port),
                iface(Interface.SP_HDL_HTTP, Interface.ST_ADMIN_AND_QUERY, server.httpPort)));
        Set<String> actual = new TreeSet<>();
        for (Interface i : srv.interfaces) {
            actual.add(iface(i.protocol, i.type, i.port));
        }
        assertEquals(expected, actual, ctx + " interfaces");

        // Request suggested 2.11 (envelope 2.3): the answer is min(2.11, server's own version).
        assertEquals(s.majorProtocolVersion, resp.majorProtocolVersion, ctx + " response major version");
        assertEquals(Math.min(11, s.minorProtocolVersion), resp.minorProtocolVersion,
                ctx + " response version should be min(request's suggested 2.11, the version the site announces)");
    }

    @Test
    void sameSiteRecordOverAllProtocols() throws Exception {
        byte[] udp = Encoder.encodeSiteInfoRecord(fetchSiteInfo(Proto.UDP, newResolver()).siteInfo);
        byte[] tcp = Encoder.encodeSiteInfoRecord(fetchSiteInfo(Proto.TCP, newResolver()).siteInfo);
        byte[] http = Encoder.encodeSiteInfoRecord(fetchSiteInfo(Proto.HTTP, newResolver()).siteInfo);
        assertArrayEquals(tcp, udp, "UDP and TCP site records differ");
        assertArrayEquals(tcp, http, "HTTP and TCP site records differ");
    }

    @ParameterizedTest
    @EnumSource(Proto.class)
    void requestIdIsEchoed(Proto p) throws Exception {
        for (int id : new int[] {1, 0x1a2b3c55, Integer.MAX_VALUE}) {
            GenericRequest req = siteInfoRequest();
            req.requestId = id;
            var resp = p.sendRaw(newResolver(), req, server);
            assertResponse(req, resp, AbstractMessage.RC_SUCCESS, "GET_SITE_INFO over " + p + " with request id " + id);
            assertEquals(id, resp.requestId);
        }
    }

    /** Some tools (hdl-home-na, admin tool) send GET_SITE_INFO with envelope version 2.0. */
    @ParameterizedTest
    @EnumSource(Proto.class)
    void acceptsOldEnvelopeVersion(Proto p) throws Exception {
        GenericRequest req = siteInfoRequest();
        req.majorProtocolVersion = 2;
        req.minorProtocolVersion = 0;
        AbstractResponse resp = p.sendRaw(newResolver(), req, server);
        assertResponse(req, resp, AbstractMessage.RC_SUCCESS, "GET_SITE_INFO v2.0 over " + p);
        assertNotNull(assertInstanceOf(GetSiteInfoResponse.class, resp).siteInfo);
    }

    /** The site record must survive the client's own JSON converter (used for local_info.json). */
    @Test
    void siteRecordRoundTripsThroughSiteInfoJson() throws Exception {
        SiteInfo s = site();
        SiteInfo back = SiteInfoConverter.convertToSiteInfo(SiteInfoConverter.convertToJson(s));
        assertArrayEquals(Encoder.encodeSiteInfoRecord(s), Encoder.encodeSiteInfoRecord(back),
                "site record changes when converted to siteinfo.json and back: " + SiteInfoConverter.convertToJson(s));
    }

    private static String iface(int protocol, int type, int port) {
        return Interface.protocolName((byte) protocol) + "/" + Interface.typeName((byte) type) + "/" + port;
    }
}
