// Records real replication exchanges with a Handle.Net server, for the wire codec's test vectors.
//
//   java -cp "CLASSES:$HSJ_HOME/lib/*" Capture HOST:PORT AUTH OUTDIR
//
// The requests go through a recording TCP relay on 127.0.0.1 (the stock library connects to the
// relay instead of the server), so every byte each way of every connection is saved as it was on
// the wire: OUTDIR/<name>-connN.c2s.bin / .s2c.bin, in order (connN = the Nth connection of that
// exchange: the request and its challenge, then the challenge answer, the response and stream).
// Exchanges (AUTH is the replication identity, see Hs.parseAuth):
//   get-next-txn-id      GET_NEXT_TXN_ID (1000) for 0.SITE/NEXT-TXN-ID
//   v27-retrieve-txn-log RETRIEVE_TXN_LOG (1001) since txn 0, request version 2.7: the response
//                        is 2.7, so the stream is the PK-signed one (type 0), in the clear
//   v27-dump-handles     DUMP_HANDLES (1002), same version
//   tls-retrieve-txn-log / tls-dump-handles: the library's own version (2.10): the stream type
//                        is TLS (0x544C5300) and the rest is TLS; the plaintext inside the TLS
//                        session is saved as <name>.tls-plaintext.bin (unsigned records)
// What the library decoded from each stream goes to <name>.decoded.txt, one line per item.
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

import javax.net.ssl.SSLSocket;

import net.cnri.util.StreamTable;
import net.handle.hdllib.*;

public class Capture {
    static Path out;
    static volatile String label = "none";
    static int connCount;
    static final List<Thread> pumps = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Capture HOST:PORT AUTH OUTDIR");
            System.exit(2);
        }
        out = Files.createDirectories(Paths.get(args[2]));
        HandleResolver resolver = Hs.newResolver();
        SiteInfo site = Hs.fetchSite(resolver, args[0]);
        AuthenticationInfo auth = Hs.parseAuth(args[1]);
        ServerInfo server = site.servers[0];
        String host = args[0].substring(0, args[0].lastIndexOf(':'));
        int port = Integer.parseInt(args[0].substring(args[0].lastIndexOf(':') + 1));
        PublicKey key = new PublicKey(server);

        ServerSocket relay = new ServerSocket();
        relay.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
        Thread acceptor = new Thread(() -> relayLoop(relay, host, port), "relay");
        acceptor.setDaemon(true);
        acceptor.start();
        for (Interface i : server.interfaces) i.port = relay.getLocalPort();

        exchange("get-next-txn-id", () -> {
            GenericRequest req = new GenericRequest(Util.encodeString("0.SITE/NEXT-TXN-ID"), AbstractMessage.OC_GET_NEXT_TXN_ID, null);
            req.isAdminRequest = true;
            req.certify = true;
            AbstractResponse r = resolver.sendRequestToServer(req, site, server);
            decoded("get-next-txn-id", List.of(r.toString()
                    + (r instanceof NextTxnIdResponse ? " nextTxnId=" + ((NextTxnIdResponse) r).nextTxnId : "")));
        });
        for (boolean tls : new boolean[] {false, true}) {
            String v = tls ? "tls-" : "v27-";
            exchange(v + "retrieve-txn-log", () -> {
                RetrieveTxnRequest req = new RetrieveTxnRequest(0, 0, SiteInfo.HASH_TYPE_BY_ALL, 1, 0, auth);
                streamed(v + "retrieve-txn-log", resolver, site, server, req, tls, key);
            });
            exchange(v + "dump-handles", () -> {
                DumpHandlesRequest req = new DumpHandlesRequest(SiteInfo.HASH_TYPE_BY_ALL, 1, 0, auth);
                streamed(v + "dump-handles", resolver, site, server, req, tls, key);
            });
        }
        relay.close();
    }

    /** The server's public key, from its site record (what a mirror checks the stream with). */
    static final class PublicKey {
        final java.security.PublicKey key;

        PublicKey(ServerInfo s) throws Exception {
            key = Util.getPublicKeyFromBytes(s.publicKey, 0);
        }
    }

    interface Step {
        void run() throws Exception;
    }

    static void exchange(String name, Step step) throws Exception {
        synchronized (pumps) {
            label = name;
            connCount = 0;
        }
        step.run();
        // wait until the relay has written down every connection of this exchange
        for (int i = 0; i < 200; i++) {
            boolean alive = false;
            synchronized (pumps) {
                for (Thread t : pumps) alive |= t.isAlive();
            }
            if (!alive) break;
            Thread.sleep(50);
        }
        synchronized (pumps) {
            pumps.clear();
        }
        System.out.println("captured " + name);
    }

    static void streamed(String name, HandleResolver resolver, SiteInfo site, ServerInfo server,
            AbstractRequest req, boolean tls, PublicKey key) throws Exception {
        List<String> items = new ArrayList<>();
        AbstractResponse r;
        if (tls) {
            r = resolver.sendRequestToServer(req, site, server);
        } else {
            // The server answers in the version the request suggests; sendRequestToServer would
            // set the library's own (2.10), sendRequestToServerByProtocol keeps what is set here.
            req.majorProtocolVersion = req.suggestMajorProtocolVersion = 2;
            req.minorProtocolVersion = req.suggestMinorProtocolVersion = 7;
            r = resolver.sendRequestToServerByProtocol(req, server, Interface.SP_HDL_TCP, null);
        }
        items.add("response " + r.getClass().getSimpleName() + " rc=" + r.responseCode + " version="
                + r.majorProtocolVersion + "." + r.minorProtocolVersion);
        if (r.responseCode != AbstractMessage.RC_SUCCESS) throw new IllegalStateException(name + ": " + r);
        if (tls) {
            // Do the client side of the TLS switch by hand, to keep the plaintext.
            byte[] type = new byte[4];
            Util.readFully(r.stream, type);
            items.add("stream type 0x" + Util.decodeHexString(type, false));
            SSLSocket ssl = (SSLSocket) SSLEngineHelper.getClientSSLContext(key.key).getSocketFactory()
                    .createSocket(r.socket, r.socket.getInetAddress().getHostAddress(), r.socket.getPort(), true);
            ssl.setEnabledCipherSuites(SSLEngineHelper.ENABLED_CIPHER_SUITES);
            ssl.setEnabledProtocols(SSLEngineHelper.ENABLED_CLIENT_PROTOCOLS);
            ssl.setUseClientMode(true);
            ssl.setSoTimeout(30_000);
            byte[] plain = ssl.getInputStream().readAllBytes();
            ssl.close();
            Files.write(out.resolve(name + ".tls-plaintext.bin"), plain);
            items.add("tls " + ssl.getSession().getProtocol() + " " + ssl.getSession().getCipherSuite() + ", plaintext " + plain.length + " bytes");
            // The plaintext is an unsigned stream: decode it as one (type -1 on a secure channel).
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            new DataOutputStream(b).writeInt(SignedInputStream.STREAM_TYPE_UNSIGNED);
            b.write(plain);
            r.stream = new java.io.ByteArrayInputStream(b.toByteArray());
            r.secureStream = true;
            r.socket = null;
        }
        if (r instanceof RetrieveTxnResponse) {
            ((RetrieveTxnResponse) r).processStreamedPart(new TxnPrinter(items), key.key);
        } else {
            ((DumpHandlesResponse) r).processStreamedPart(new DumpPrinter(items), key.key);
        }
        decoded(name, items);
    }

    static void decoded(String name, List<String> lines) throws IOException {
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(out.resolve(name + ".decoded.txt")))) {
            for (String l : lines) w.println(l);
        }
    }

    static String values(HandleValue[] vs) {
        if (vs == null) return "null";
        StringBuilder b = new StringBuilder("[");
        for (HandleValue v : vs) {
            b.append(b.length() > 1 ? ", " : "").append(v.getIndex()).append(' ').append(v.getTypeAsString())
                    .append(" ts=").append(v.getTimestamp()).append(" data=").append(Util.decodeHexString(v.getData(), false));
        }
        return b.append(']').toString();
    }

    static final class TxnPrinter implements TransactionCallback {
        final List<String> items;

        TxnPrinter(List<String> items) {
            this.items = items;
        }

        public void processTransaction(Transaction t) {
            items.add("txn " + t.txnId + " " + Transaction.actionToString(t.action) + " " + Util.decodeString(t.handle)
                    + " date=" + t.date + " values=" + values(t.values));
        }

        public void processTransaction(String queue, Transaction t) {
            items.add("queue " + queue);
            processTransaction(t);
        }

        public void finishProcessing(long date) {
            items.add("end date=" + date);
        }

        public void finishProcessing() {
            items.add("end");
        }

        public void setQueueLastTimestamp(String queue, long date) {
            items.add("queue-end " + queue + " date=" + date);
        }
    }

    static final class DumpPrinter implements DumpHandlesCallback {
        final List<String> items;

        DumpPrinter(List<String> items) {
            this.items = items;
        }

        public void addHandle(byte[] h, HandleValue[] vs) {
            items.add("handle " + Util.decodeString(h) + " values=" + values(vs));
        }

        public void addHomedPrefix(byte[] p) {
            items.add("homed " + Util.decodeString(p));
        }

        public void processThisServerReplicationInfo(long date, long txnId) {
            items.add("this-server date=" + date + " lastTxnId=" + txnId);
        }

        public void processOtherSiteReplicationInfo(StreamTable t) {
            items.add("other-sites " + t.toString().replace('\n', ' '));
        }

        public void setLastCreateOrDeleteDate(byte[] h, long date, int priority) {
            items.add("handle-date " + Util.decodeString(h) + " date=" + date + " priority=" + priority);
        }

        public void setLastHomeOrUnhomeDate(byte[] p, long date, int priority) {
            items.add("na-date " + Util.decodeString(p) + " date=" + date + " priority=" + priority);
        }
    }

    // --- the recording relay ---------------------------------------------------------------
    static void relayLoop(ServerSocket relay, String host, int port) {
        while (!relay.isClosed()) {
            try {
                Socket client = relay.accept();
                Socket upstream = new Socket(host, port);
                String base;
                synchronized (pumps) {
                    base = label + "-conn" + (++connCount);
                    Thread c2s = pump(client, upstream, out.resolve(base + ".c2s.bin"));
                    Thread s2c = pump(upstream, client, out.resolve(base + ".s2c.bin"));
                    pumps.add(c2s);
                    pumps.add(s2c);
                }
            } catch (IOException e) {
                if (!relay.isClosed()) e.printStackTrace();
            }
        }
    }

    /** Copies from → to until EOF, recording the bytes; then half-closes the other side. */
    static Thread pump(Socket from, Socket to, Path record) {
        Thread t = new Thread(() -> {
            ByteArrayOutputStream seen = new ByteArrayOutputStream();
            try (InputStream in = from.getInputStream()) {
                OutputStream o = to.getOutputStream();
                byte[] buf = new byte[8192];
                int n;
                while ((n = in.read(buf)) > 0) {
                    seen.write(buf, 0, n);
                    o.write(buf, 0, n);
                    o.flush();
                }
            } catch (IOException e) {
                // connection reset: keep what was seen
            } finally {
                try {
                    if (!to.isClosed()) to.shutdownOutput();
                } catch (IOException ignored) {
                    // already gone
                }
                try {
                    Files.write(record, seen.toByteArray());
                } catch (IOException e) {
                    e.printStackTrace();
                }
            }
        }, "pump " + record.getFileName());
        t.setDaemon(true);
        t.start();
        return t;
    }
}
