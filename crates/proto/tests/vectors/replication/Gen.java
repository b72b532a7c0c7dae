// Makes the replication vectors in this folder with the official Handle.Net Java
// library 9.0.0 (see README.md). Run: ./generate.sh /path/to/hsj-9.0.0/lib
import java.io.*;
import java.lang.reflect.Proxy;
import java.security.*;
import java.util.*;
import com.google.gson.*;
import net.cnri.util.StreamTable;
import net.cnri.util.StreamVector;
import net.handle.hdllib.*;

public class Gen {
    static final int EXPIRATION = 1764000000; // pinned so messages regenerate identically
    static final Gson GSON = new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create();

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.toString();
    }

    static String str(byte[] b) { return b == null ? null : new String(b, java.nio.charset.StandardCharsets.UTF_8); }

    // ---- messages -------------------------------------------------------

    static <T extends AbstractMessage> T pin(T m, int major, int minor) {
        m.majorProtocolVersion = (byte) major;
        m.minorProtocolVersion = (byte) minor;
        m.expiration = EXPIRATION;
        m.requestId = 4242;
        return m;
    }

    static JsonObject envelopeFor(AbstractMessage m, byte[] message) {
        MessageEnvelope env = new MessageEnvelope();
        env.protocolMajorVersion = m.majorProtocolVersion;
        env.protocolMinorVersion = m.minorProtocolVersion;
        env.suggestMajorProtocolVersion = m.suggestMajorProtocolVersion;
        env.suggestMinorProtocolVersion = m.suggestMinorProtocolVersion;
        env.requestId = m.requestId;
        env.messageLength = message.length;
        byte[] e = new byte[20];
        Encoder.encodeEnvelope(env, e);
        JsonObject o = new JsonObject();
        o.addProperty("envelope_hex", hex(e));
        o.addProperty("version", m.majorProtocolVersion + "." + m.minorProtocolVersion);
        return o;
    }

    static AbstractMessage decode(byte[] message, int major, int minor) throws Exception {
        MessageEnvelope env = new MessageEnvelope();
        env.protocolMajorVersion = (byte) major;
        env.protocolMinorVersion = (byte) minor;
        env.messageLength = message.length;
        return Encoder.decodeMessage(message, 0, env);
    }

    /** The fields Java's decoder extracted. */
    static JsonObject view(AbstractMessage m) {
        JsonObject o = new JsonObject();
        o.addProperty("op_code", m.opCode);
        o.addProperty("response_code", m.responseCode);
        o.addProperty("certify", m.certify);
        o.addProperty("return_request_digest", m.returnRequestDigest);
        if (m.requestDigest != null) {
            o.addProperty("rd_hash_type", m.rdHashType);
            o.addProperty("request_digest_hex", hex(m.requestDigest));
        }
        if (m instanceof RetrieveTxnRequest) {
            RetrieveTxnRequest r = (RetrieveTxnRequest) m;
            if (r.replicationStateInfo != null) {
                o.addProperty("replication_state_info_json", GsonUtility.getGson().toJson(r.replicationStateInfo));
            } else {
                o.addProperty("last_txn_id", r.lastTxnId);
                o.addProperty("last_query_date", r.lastQueryDate);
            }
            o.addProperty("rcvr_hash_type", r.rcvrHashType);
            o.addProperty("num_servers", r.numServers);
            o.addProperty("server_num", r.serverNum);
        } else if (m instanceof DumpHandlesRequest) {
            DumpHandlesRequest r = (DumpHandlesRequest) m;
            o.addProperty("rcvr_hash_type", r.rcvrHashType);
            o.addProperty("num_servers", r.numServers);
            o.addProperty("server_num", r.serverNum);
            if (r.startingPoint != null) {
                o.addProperty("starting_point", str(r.startingPoint));
                o.addProperty("starting_point_type", r.startingPointType);
            }
        } else if (m instanceof GenericRequest) {
            o.addProperty("handle", str(((GenericRequest) m).handle));
        } else if (m instanceof NextTxnIdResponse) {
            o.addProperty("next_txn_id", ((NextTxnIdResponse) m).nextTxnId);
        } else if (m instanceof RetrieveTxnResponse) {
            o.addProperty("keep_alive", m.keepAlive);
        }
        o.addProperty("java_class", m.getClass().getSimpleName());
        return o;
    }

    static JsonObject message(String name, AbstractMessage m, String about) throws Exception {
        byte[] msg = m.getEncodedMessage();
        JsonObject o = envelopeFor(m, msg);
        o.addProperty("name", name);
        o.addProperty("about", about);
        o.addProperty("message_hex", hex(msg));
        o.add("java_decoded", view(decode(msg, m.majorProtocolVersion, m.minorProtocolVersion)));
        return o;
    }

    /** A message with `extra` appended to its body, as Java's decoder sees it. */
    static JsonObject withTrailing(String name, AbstractMessage m, byte[] extra, String about) throws Exception {
        byte[] msg = m.getEncodedMessage();
        int bodyLen = Encoder.readInt(msg, 20);
        byte[] out = new byte[msg.length + extra.length];
        System.arraycopy(msg, 0, out, 0, 24 + bodyLen);
        System.arraycopy(extra, 0, out, 24 + bodyLen, extra.length);
        System.arraycopy(msg, 24 + bodyLen, out, 24 + bodyLen + extra.length, msg.length - 24 - bodyLen);
        Encoder.writeInt(out, 20, bodyLen + extra.length);
        JsonObject o = envelopeFor(m, out);
        o.addProperty("name", name);
        o.addProperty("about", about);
        o.addProperty("message_hex", hex(out));
        o.addProperty("trailing_hex", hex(extra));
        o.add("java_decoded", view(decode(out, m.majorProtocolVersion, m.minorProtocolVersion)));
        return o;
    }

    static ReplicationStateInfo stateInfo() {
        ReplicationStateInfo s = new ReplicationStateInfo();
        s.setLastTxnId("0:1:0.NA/20.5001", 17);
        s.setLastTimestamp("0:1:0.NA/20.5001", 1763900000000L);
        s.setOwnName("2:0.NA/20.5000");
        return s;
    }

    static JsonArray messages() throws Exception {
        JsonArray a = new JsonArray();
        GenericRequest next = pin(new GenericRequest(Util.encodeString("0.SITE/NEXT-TXN-ID"), 1000, null), 2, 10);
        next.isAdminRequest = true;
        next.certify = true;
        a.add(message("get_next_txn_id_request", next, "GET_NEXT_TXN_ID as HandleServer.retrieveNextTxnId builds it"));
        next.returnRequestDigest = true;
        next.encodedMessage = null; next.messageBody = null;
        NextTxnIdResponse nres = pin(new NextTxnIdResponse(next, 9007199254740993L), 2, 10);
        a.add(message("next_txn_id_response_rd", nres, "answer with SHA-256 request digest"));
        a.add(message("next_txn_id_response", pin(new NextTxnIdResponse(77L), 2, 10), "answer without digest"));

        RetrieveTxnRequest since = pin(new RetrieveTxnRequest(1234567890123L, 1763912345678L, (byte) 2, 3, 1, null), 2, 10);
        since.encrypt = false;
        a.add(message("retrieve_txn_request_2_10", since, ">= 2.9 form, flag 0: one queue"));
        RetrieveTxnRequest old = pin(new RetrieveTxnRequest(5L, 1763912345678L, (byte) 0, 1, 0, null), 2, 1);
        a.add(message("retrieve_txn_request_2_1", old, "pre-2.9 form (site record says 2.1): no flag byte"));
        RetrieveTxnRequest all = pin(new RetrieveTxnRequest(stateInfo(), (byte) 1, 2, 0, null), 2, 10);
        a.add(message("retrieve_txn_request_all_queues", all, ">= 2.9 form, flag 1: ReplicationStateInfo JSON"));
        RetrieveTxnRequest noOwn = pin(new RetrieveTxnRequest(new ReplicationStateInfo(), (byte) 0, 1, 0, null), 2, 9);
        a.add(message("retrieve_txn_request_all_queues_empty", noOwn, "flag 1 with an empty state (Gson omits the null ownName)"));
        byte[] wait = new byte[4];
        Encoder.writeInt(wait, 0, 25000);
        since.encodedMessage = null; since.messageBody = null;
        a.add(withTrailing("retrieve_txn_request_wait_ignored_by_java", since, wait,
            "our long-poll extension (i32 waitMillis after the fields): Java's decoder reads the same fields as without it"));
        old.encodedMessage = null; old.messageBody = null;
        a.add(withTrailing("retrieve_txn_request_2_1_wait_ignored_by_java", old, wait, "the same for the pre-2.9 form"));
        all.encodedMessage = null; all.messageBody = null;
        a.add(withTrailing("retrieve_txn_request_all_queues_wait_ignored_by_java", all, wait, "the same for the all-queues form"));

        since.returnRequestDigest = true;
        since.encodedMessage = null; since.messageBody = null;
        RetrieveTxnResponse rres = pin(new RetrieveTxnResponse(null, 0L, since, null), 2, 10);
        a.add(message("retrieve_txn_response_rd", rres, "success with digest; the stream follows"));
        RetrieveTxnResponse rka = pin(new RetrieveTxnResponse(), 2, 10);
        rka.keepAlive = true;
        a.add(message("retrieve_txn_response_keep_alive", rka, "flags bit 0 = keepAlive"));

        DumpHandlesRequest dump = pin(new DumpHandlesRequest((byte) 1, 2, 1, null), 2, 10);
        a.add(message("dump_handles_request", dump, "DUMP_HANDLES: layout only"));
        DumpHandlesRequest resume = pin(new DumpHandlesRequest((byte) 2, 1, 0, null, Util.encodeString("20.5000/abc"), 2), 2, 10);
        a.add(message("dump_handles_request_resume", resume, "DUMP_HANDLES resuming after a handle of the storage scan"));
        dump.returnRequestDigest = true;
        dump.encodedMessage = null; dump.messageBody = null;
        DumpHandlesResponse dres = pin(new DumpHandlesResponse(dump, null, null, null), 2, 10);
        a.add(message("dump_handles_response_rd", dres, "success: digest only"));

        GenericRequest backup = pin(new GenericRequest(Util.encodeString("0.NA/20.5000"), 1003, null), 2, 10);
        a.add(message("backup_server_request", backup, "BACKUP_SERVER (checkpoint), generic body"));
        a.add(message("backup_server_response", pin(new GenericResponse(backup, 1), 2, 10), "generic success"));
        return a;
    }

    // ---- streams --------------------------------------------------------

    /** Records every block the library signs: the bytes and the signature. */
    static class RecordingSignedOutputStream extends SignedOutputStream {
        final ByteArrayOutputStream block = new ByteArrayOutputStream();
        final JsonArray blocks = new JsonArray();
        final ByteArrayOutputStream sink;
        RecordingSignedOutputStream(PrivateKey key, ByteArrayOutputStream sink) throws Exception {
            super(key, sink);
            this.sink = sink;
        }
        @Override public void write(int b) throws IOException { block.write(b); super.write(b); }
        @Override public void write(byte[] b) throws IOException { block.write(b, 0, b.length); super.write(b); }
        @Override public void write(byte[] b, int off, int len) throws IOException { block.write(b, off, len); super.write(b, off, len); }
        @Override public void signBlock() throws IOException, SignatureException {
            int before = sink.size();
            super.signBlock();
            byte[] all = sink.toByteArray();
            byte[] sigPart = Arrays.copyOfRange(all, before + 4, all.length);
            JsonObject o = new JsonObject();
            o.addProperty("signed_hex", hex(block.toByteArray()));
            o.addProperty("signature_hex", hex(sigPart));
            blocks.add(o);
            block.reset();
        }
    }

    @SuppressWarnings("unchecked")
    static <T> T proxy(Class<T> iface, Map<String, java.util.function.Function<Object[], Object>> impl) {
        return (T) Proxy.newProxyInstance(Gen.class.getClassLoader(), new Class<?>[] { iface }, (p, m, args) -> {
            java.util.function.Function<Object[], Object> f = impl.get(m.getName());
            if (f == null) {
                if (m.getName().equals("close") || m.getName().startsWith("pause") || m.getName().startsWith("unpause")) return null;
                throw new UnsupportedOperationException(m.getName());
            }
            return f.apply(args);
        });
    }

    static HandleValue value(int idx, String type, String data) {
        HandleValue v = new HandleValue(idx, type, data);
        v.setTimestamp(1763000000);
        return v;
    }

    static final Map<String, HandleValue[]> STORE = new LinkedHashMap<>();
    static {
        STORE.put("20.5000/A", new HandleValue[] { value(1, "URL", "https://example.org/a"), value(2, "EMAIL", "a@example.org") });
        STORE.put("20.5000/B", new HandleValue[] { value(100, "HS_ADMIN", "") });
    }

    static HandleStorage storage() {
        Map<String, java.util.function.Function<Object[], Object>> m = new HashMap<>();
        m.put("getRawHandleValues", args -> {
            HandleValue[] v = STORE.get(str((byte[]) args[0]));
            return v == null ? null : Encoder.encodeHandleValues(v);
        });
        m.put("scanHandles", args -> { scan((ScanCallback) args[0], STORE.keySet()); return null; });
        m.put("scanNAs", args -> { scan((ScanCallback) args[0], Arrays.asList("0.NA/20.5000")); return null; });
        m.put("supportsDumpResumption", args -> true);
        m.put("scanHandlesFrom", args -> {
            String from = str((byte[]) args[0]);
            List<String> after = new ArrayList<>();
            for (String h : STORE.keySet()) if (h.compareTo(from) > 0) after.add(h);
            scan((ScanCallback) args[2], after);
            return null;
        });
        return proxy(HandleStorage.class, m);
    }

    static void scan(ScanCallback cb, Collection<String> handles) {
        try {
            for (String h : handles) cb.scanHandle(Util.encodeString(h));
        } catch (HandleException e) { throw new RuntimeException(e); }
    }

    static Transaction txn(long id, String handle, byte action, long date) {
        Transaction t = new Transaction(id, Util.encodeString(handle), action, date);
        return t;
    }

    static TransactionQueueInterface queue(long firstDate, List<Transaction> txns) {
        Map<String, java.util.function.Function<Object[], Object>> m = new HashMap<>();
        m.put("getFirstDate", args -> firstDate);
        m.put("getLastTxnId", args -> txns.isEmpty() ? 0L : txns.get(txns.size() - 1).txnId);
        m.put("getScanner", args -> {
            Iterator<Transaction> it = txns.iterator();
            Map<String, java.util.function.Function<Object[], Object>> s = new HashMap<>();
            s.put("nextTransaction", a -> it.hasNext() ? it.next() : null);
            return proxy(TransactionScannerInterface.class, s);
        });
        return proxy(TransactionQueueInterface.class, m);
    }

    static List<Transaction> txns() {
        return Arrays.asList(
            txn(10, "20.5000/A", Transaction.ACTION_CREATE_HANDLE, 1763900001000L),
            txn(11, "20.5000/GONE", Transaction.ACTION_UPDATE_HANDLE, 1763900002000L),
            txn(12, "20.5000/C", Transaction.ACTION_DELETE_HANDLE, 1763900003000L),
            txn(13, "0.NA/20.5000", Transaction.ACTION_HOME_NA, 1763900004000L),
            txn(14, "0.NA/20.5009", Transaction.ACTION_UNHOME_NA, 1763900005000L),
            txn(15, "20.5000/B", Transaction.ACTION_UPDATE_HANDLE, 1763900006000L));
    }

    /** What Java's reader makes of a transaction stream. */
    static JsonArray readTxnStream(byte[] stream, PublicKey key) throws Exception {
        JsonArray events = new JsonArray();
        RetrieveTxnResponse res = new RetrieveTxnResponse();
        res.stream = new ByteArrayInputStream(stream);
        res.secureStream = key == null;
        TransactionCallback cb = new TransactionCallback() {
            public void processTransaction(Transaction t) { events.add(txnView(null, t)); }
            public void processTransaction(String q, Transaction t) { events.add(txnView(q, t)); }
            public void finishProcessing(long date) { JsonObject o = new JsonObject(); o.addProperty("event", "finish"); o.addProperty("date", date); events.add(o); }
            public void finishProcessing() { JsonObject o = new JsonObject(); o.addProperty("event", "finish"); events.add(o); }
            public void setQueueLastTimestamp(String q, long date) { JsonObject o = new JsonObject(); o.addProperty("event", "queue_last_timestamp"); o.addProperty("queue", q); o.addProperty("date", date); events.add(o); }
        };
        int status = res.processStreamedPart(cb, key);
        JsonObject o = new JsonObject();
        o.addProperty("event", "status");
        o.addProperty("status", status);
        events.add(o);
        return events;
    }

    static JsonObject txnView(String queue, Transaction t) {
        JsonObject o = new JsonObject();
        o.addProperty("event", "transaction");
        if (queue != null) o.addProperty("queue", queue);
        o.addProperty("txn_id", t.txnId);
        o.addProperty("handle", str(t.handle));
        o.addProperty("action", t.action);
        o.addProperty("date", t.date);
        if (t.values != null) o.add("values", valuesView(t.values));
        return o;
    }

    static JsonArray valuesView(HandleValue[] values) {
        JsonArray a = new JsonArray();
        for (HandleValue v : values) a.add(hex(Encoder.encodeHandleValue(v)));
        return a;
    }

    static JsonArray readDumpStream(byte[] stream, PublicKey key) throws Exception {
        JsonArray events = new JsonArray();
        DumpHandlesResponse res = new DumpHandlesResponse();
        res.stream = new ByteArrayInputStream(stream);
        res.secureStream = key == null;
        DumpHandlesCallback cb = new DumpHandlesCallback() {
            public void addHandle(byte[] h, HandleValue[] v) { JsonObject o = ev("handle"); o.addProperty("handle", str(h)); o.add("values", valuesView(v)); events.add(o); }
            public void addHomedPrefix(byte[] p) { JsonObject o = ev("homed_prefix"); o.addProperty("prefix", str(p)); events.add(o); }
            public void processThisServerReplicationInfo(long date, long txnId) { JsonObject o = ev("this_server"); o.addProperty("date", date); o.addProperty("last_txn_id", txnId); events.add(o); }
            public void processOtherSiteReplicationInfo(StreamTable t) { JsonObject o = ev("other_sites"); o.addProperty("text", t.writeToString()); events.add(o); }
            public void setLastCreateOrDeleteDate(byte[] h, long date, int prio) { JsonObject o = ev("handle_date"); o.addProperty("handle", str(h)); o.addProperty("date", date); o.addProperty("priority", prio); events.add(o); }
            public void setLastHomeOrUnhomeDate(byte[] h, long date, int prio) { JsonObject o = ev("na_date"); o.addProperty("prefix", str(h)); o.addProperty("date", date); o.addProperty("priority", prio); events.add(o); }
        };
        res.processStreamedPart(cb, key);
        events.add(ev("done"));
        return events;
    }

    static JsonObject ev(String name) { JsonObject o = new JsonObject(); o.addProperty("event", name); return o; }

    static byte[] dated(String handle, long date, int priority) {
        byte[] h = Util.encodeString(handle);
        byte[] out = new byte[4 + h.length + 12];
        int off = Encoder.writeByteArray(out, 0, h);
        off += Encoder.writeLong(out, off, date);
        Encoder.writeInt(out, off, priority);
        return out;
    }

    static ReplicationDaemonInterface daemon() {
        Map<String, java.util.function.Function<Object[], Object>> m = new HashMap<>();
        m.put("replicationStatus", args -> {
            StreamTable t = new StreamTable();
            StreamVector v = new StreamVector();
            StreamTable s = new StreamTable();
            s.put("last_txn_id", 17L);
            s.put("last_timestamp", 1763900000000L);
            v.add(s);
            t.put("1:0.NA/20.5001", v);
            return t;
        });
        m.put("handleIterator", args -> Arrays.asList(dated("20.5000/A", 1763800000000L, 0), dated("20.5000/C", 1763800001000L, 1)).iterator());
        m.put("naIterator", args -> Arrays.asList(dated("0.NA/20.5000", 1763700000000L, 0)).iterator());
        return proxy(ReplicationDaemonInterface.class, m);
    }

    interface StreamBody { void write(SignedOutputStream out) throws Exception; }

    static JsonObject stream(String name, String kind, String about, KeyPair keys, StreamBody body, boolean txn) throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        JsonObject o = new JsonObject();
        o.addProperty("name", name);
        o.addProperty("kind", kind);
        o.addProperty("about", about);
        RecordingSignedOutputStream rec = null;
        if (keys != null) {
            rec = new RecordingSignedOutputStream(keys.getPrivate(), sink);
            body.write(rec);
        } else {
            body.write(new SignedOutputStream(sink));
        }
        byte[] bytes = sink.toByteArray();
        o.addProperty("signed", keys != null);
        o.addProperty("stream_hex", hex(bytes));
        if (rec != null) o.add("signed_blocks", rec.blocks);
        PublicKey pub = keys == null ? null : keys.getPublic();
        o.add("java_read", txn ? readTxnStream(bytes, pub) : readDumpStream(bytes, pub));
        return o;
    }

    static RetrieveTxnRequest sinceReq(long last, long date) {
        return new RetrieveTxnRequest(last, date, (byte) 0, 1, 0, null);
    }

    static TransactionQueuesInterface queues(TransactionQueueInterface own, Map<String, TransactionQueueInterface> others) {
        Map<String, java.util.function.Function<Object[], Object>> m = new HashMap<>();
        m.put("getThisServersTransactionQueue", args -> own);
        m.put("listQueueNames", args -> new ArrayList<>(others.keySet()));
        m.put("getQueue", args -> others.get((String) args[0]));
        return proxy(TransactionQueuesInterface.class, m);
    }

    static JsonArray streams(KeyPair keys) throws Exception {
        JsonArray a = new JsonArray();
        for (KeyPair k : new KeyPair[] { null, keys }) {
            String suffix = k == null ? "unsigned" : "signed";
            a.add(stream("txn_v1_sending_" + suffix, "txn", "one queue: create (values), update of a vanished handle (0 values), delete, home, unhome, update; END with the source's clock", k,
                out -> new RetrieveTxnResponse(queue(1000L, txns()), 15L, sinceReq(9, 2000L), storage()).streamResponse(out), true));
            a.add(stream("txn_v1_redump_" + suffix, "txn", "NEED_TO_REDUMP: header, then END with the request's own date", k,
                out -> new RetrieveTxnResponse(queue(5000L, txns()), 15L, sinceReq(7, 2000L), storage()).streamResponse(out), true));
            ReplicationStateInfo served = new ReplicationStateInfo();
            served.setLastTxnId("0:1:0.NA/20.5001", 3);
            served.setLastTimestamp("0:1:0.NA/20.5001", 1763900009000L);
            ReplicationStateInfo client = new ReplicationStateInfo();
            client.setOwnName("2:0.NA/20.5002");
            client.setLastTxnId("0:1:0.NA/20.5000", 12);
            client.setLastTimestamp("0:1:0.NA/20.5000", 1763900000000L);
            client.setLastTxnId("0:1:0.NA/20.5001", 1);
            client.setLastTimestamp("0:1:0.NA/20.5001", 1763900000000L);
            Map<String, TransactionQueueInterface> others = new LinkedHashMap<>();
            others.put("0:1:0.NA/20.5001", queue(1000L, Arrays.asList(
                txn(2, "20.5001/X", Transaction.ACTION_DELETE_HANDLE, 1763900007000L),
                txn(3, "20.5000/A", Transaction.ACTION_CREATE_HANDLE, 1763900008000L))));
            a.add(stream("txn_v2_all_queues_" + suffix, "txn", "all queues: own queue (name, records after 12, queue end), one other queue, END without date", k,
                out -> new RetrieveTxnResponse(queues(queue(1000L, txns()), others), "0:1:0.NA/20.5000", 15L, served,
                    new RetrieveTxnRequest(client, (byte) 0, 1, 0, null), storage()).streamResponse(out), true));
            a.add(stream("dump_v2_" + suffix, "dump", "full dump: other sites, this server, handle dates, NA dates, handles, homed prefix, done", k,
                out -> new DumpHandlesResponse(new DumpHandlesRequest((byte) 0, 1, 0, null), storage(), queue(1000L, txns()), daemon()).streamResponse(out), false));
            a.add(stream("dump_v2_resumed_" + suffix, "dump", "dump resumed after handle 20.5000/A of the storage scan", k,
                out -> new DumpHandlesResponse(new DumpHandlesRequest((byte) 0, 1, 0, null, Util.encodeString("20.5000/A"), 2), storage(), queue(1000L, txns()), daemon()).streamResponse(out), false));
        }
        return a;
    }

    public static void main(String[] argv) throws Exception {
        File dir = new File(argv.length > 0 ? argv[0] : ".");
        JsonObject m = new JsonObject();
        m.addProperty("made_by", "net.handle.hdllib 9.0.0 (handle-9.0.0.jar), crates/proto/tests/vectors/replication/Gen.java");
        m.add("messages", messages());
        write(new File(dir, "messages.json"), m);

        KeyPairGenerator g = KeyPairGenerator.getInstance("RSA");
        g.initialize(1024);
        KeyPair keys = g.generateKeyPair();
        JsonObject s = new JsonObject();
        s.addProperty("made_by", "net.handle.hdllib 9.0.0 (handle-9.0.0.jar), crates/proto/tests/vectors/replication/Gen.java");
        s.addProperty("signing_key_spki_hex", hex(keys.getPublic().getEncoded()));
        s.addProperty("signature_algorithm", "SHA1withRSA (hash id \"SHA1\")");
        s.add("streams", streams(keys));
        write(new File(dir, "streams.json"), s);
    }

    static void write(File f, JsonObject o) throws IOException {
        try (Writer w = new OutputStreamWriter(new FileOutputStream(f), "UTF-8")) {
            w.write(GSON.toJson(o));
            w.write("\n");
        }
    }
}
