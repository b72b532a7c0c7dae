package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.URL;
import java.security.KeyPairGenerator;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import net.handle.hdllib.AbstractRequest;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.SSLEngineHelper;
import net.handle.hdllib.Util;
import net.handle.util.X509HSTrustManager;
import org.junit.jupiter.api.Test;

/**
 * Handle-based certificates (Technical Manual §14.6.1): the HTTPS certificate is self-signed and
 * wraps the public key of the server's HS_SITE entry, so that clients authenticate the server by
 * that key rather than by a certificate authority. Checked with the library's own trust managers:
 * {@code SSLEngineHelper.getClientSSLContext} (what {@code HandleResolver} uses for its HTTPS
 * sockets) pinned to the site's key, and {@code X509HSTrustManager}, which resolves the
 * {@code index:handle} the certificate's subject names and compares the key published there.
 */
class HandleBasedCertificateTest extends ServerTestBase {

    private static int status(SSLContext tls, String path) throws IOException {
        URL url = new URL("https://127.0.0.1:" + server.httpPort + path);
        HttpsURLConnection c = (HttpsURLConnection) url.openConnection();
        c.setSSLSocketFactory(tls.getSocketFactory());
        c.setHostnameVerifier((host, session) -> true); // the key is what is checked, as the library does
        c.setConnectTimeout(TCP_TIMEOUT_MS);
        c.setReadTimeout(TCP_TIMEOUT_MS);
        try {
            return c.getResponseCode();
        } finally {
            c.disconnect();
        }
    }

    @Test
    void theSiteKeyAuthenticatesTheHttpsServer() throws Exception {
        byte[] siteKey = serverInfo().publicKey;
        assertEquals(200, status(SSLEngineHelper.getClientSSLContext(siteKey), "/api/handles/TEST/ADMIN"));

        KeyPairGenerator g = KeyPairGenerator.getInstance("RSA");
        g.initialize(2048);
        byte[] otherKey = Util.getBytesFromPublicKey(g.generateKeyPair().getPublic());
        assertThrows(IOException.class, () -> status(SSLEngineHelper.getClientSSLContext(otherKey), "/api/handles/TEST/ADMIN"),
                "a client pinned to another key must refuse the server");
    }

    @Test
    void theCertificateNamesTheHandleThatPublishesItsKey() throws Exception {
        // On a data directory copied from a promoted mirror (tests/replication/migration.sh)
        // the prefix handles are the source's, so the certificate names none.
        assumeTrue(System.getenv("HANDLED_TEST_DATA_FROM") == null,
                "the server runs on a promoted mirror's data: its prefix handles publish another site");
        // The library's trust manager resolves the subject's index:handle; this resolver sends
        // that resolution to the server under test (the prefix handle lives there, not in a
        // global registry this test cannot reach).
        HandleResolver toServer = new HandleResolver() {
            @Override
            public AbstractResponse processRequest(AbstractRequest req) throws HandleException {
                return sendRequestToSite(req, site());
            }
        };
        toServer.getConfiguration().setAutoUpdateRootInfo(false);
        toServer.setTcpTimeout(TCP_TIMEOUT_MS);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, new TrustManager[] {new X509HSTrustManager(toServer)}, null);

        URL url = new URL("https://127.0.0.1:" + server.httpPort + "/api/handles/TEST/ADMIN");
        HttpsURLConnection c = (HttpsURLConnection) url.openConnection();
        c.setSSLSocketFactory(tls.getSocketFactory());
        c.setHostnameVerifier((host, session) -> true);
        c.setConnectTimeout(TCP_TIMEOUT_MS);
        c.setReadTimeout(TCP_TIMEOUT_MS);
        try {
            assertEquals(200, c.getResponseCode());
            Certificate[] chain = c.getServerCertificates();
            X509Certificate cert = (X509Certificate) chain[0];
            assertEquals("1:0.NA/TEST", X509HSTrustManager.parseIdentity(cert).toString(),
                    "subject " + cert.getSubjectX500Principal());
            assertArrayEquals(serverInfo().publicKey, Util.getBytesFromPublicKey(cert.getPublicKey()),
                    "the certificate's key is the site's");
        } finally {
            c.disconnect();
        }
    }
}
