// Fills a STOPPED Handle.Net server directory with N handles, offline, through the server's own
// storage class (as the harness's BootstrapAdmin does): the data set for dump throughput figures.
//
//   java -cp "CLASSES:$HSJ_HOME/lib/*:$HSJ_HOME/lib/jetty/*" BulkLoad SERVER_DIR PREFIX N ADMIN_REF
//
// Handles PREFIX/BULK-0000001.. with HS_ADMIN (ADMIN_REF = idx:handle), a URL and an EMAIL value:
// about the size of a typical DOI-style record. Written offline, so they are in the storage but
// not in the transaction log (a dump sends them; a log pull does not).
import java.io.File;

import net.cnri.util.StreamTable;
import net.handle.hdllib.AdminRecord;
import net.handle.hdllib.Common;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.HandleStorage;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.Util;
import net.handle.server.HandleStorageFactory;

public class BulkLoad {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: BulkLoad SERVER_DIR PREFIX N ADMIN_IDX:ADMIN_HANDLE");
            System.exit(2);
        }
        File dir = new File(args[0]);
        String prefix = args[1];
        int n = Integer.parseInt(args[2]);
        int colon = args[3].indexOf(':');
        int adminIdx = Integer.parseInt(args[3].substring(0, colon));
        byte[] adminHandle = Util.encodeString(args[3].substring(colon + 1));

        StreamTable cfg = new StreamTable();
        cfg.readFromFile(new File(dir, "config.dct"));
        HandleStorage storage = HandleStorageFactory.getStorage(dir, (StreamTable) cfg.get("server_config"), true);
        int now = (int) (System.currentTimeMillis() / 1000);
        byte[] admin = Encoder.encodeAdminRecord(new AdminRecord(adminHandle, adminIdx, true, true, true, true, true, true, true, true, true, true, true, true));
        long t0 = System.nanoTime();
        try {
            for (int i = 1; i <= n; i++) {
                String suffix = String.format("BULK-%07d", i);
                byte[] h = Util.upperCase(Util.encodeString(prefix + "/" + suffix));
                HandleValue[] values = {
                    new HandleValue(100, Common.STD_TYPE_HSADMIN, admin),
                    new HandleValue(1, Util.encodeString("URL"), Util.encodeString("https://example.org/landing/" + suffix.toLowerCase())),
                    new HandleValue(2, Util.encodeString("EMAIL"), Util.encodeString("owner-" + i + "@example.org")),
                };
                for (HandleValue v : values) v.setTimestamp(now);
                storage.createHandle(h, values);
            }
            storage.checkpointDatabase();
        } finally {
            storage.shutdown();
        }
        System.out.printf("loaded %d handles in %.1f s%n", n, (System.nanoTime() - t0) / 1e9);
    }
}
