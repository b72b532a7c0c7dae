package org.handled.interop;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.handle.hdllib.AdminRecord;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.GsonUtility;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.Util;

/**
 * The handles every test server is started with. The import file is produced from these
 * {@link HandleValue}s by the client library's own JSON writer ({@link GsonUtility}), i.e. exactly
 * the Handle.Net v9 REST value format; the tests then compare what the server returns against
 * the same objects.
 */
public final class Fixtures {
    private Fixtures() {}

    public static final String PREFIX = "TEST";

    /** Relative TTL used when a value doesn't set one (HandleValue default). */
    public static final int DEFAULT_TTL = 86400;

    /** 2030-01-01T00:00:00Z, used as an absolute TTL. */
    public static final int ABSOLUTE_TTL = 1893456000;

    public static final String H1 = "TEST/1";
    public static final String H2 = "TEST/2";
    public static final String ABC = "TEST/ABC";
    public static final String SECRET = "TEST/SECRET";
    public static final String ONLY_SECRET = "TEST/ONLYSECRET";
    public static final String BIG = "TEST/BIG";
    /** Over the server's default UDP answer limit (8192 bytes): answered over TCP only. */
    public static final String HUGE = "TEST/HUGE";
    public static final int HUGE_VALUES = 12;

    public static final String BIG_URL = bigUrl(3000);
    public static final byte[] BIG_BLOB = blob(2500);

    private static final Map<String, HandleValue[]> HANDLES = new LinkedHashMap<>();

    static {
        HANDLES.put(H1, new HandleValue[] {
            value(1, "URL", "https://example.org/1"),
            ttl(value(2, "EMAIL", "info@example.org"), 3600),
            value(3, "URL.alt", "https://mirror.example.org/1"),
            ttl(value(4, "CUSTOM", new byte[] {0x00, 0x01, 0x02, (byte) 0xff, (byte) 0x80, 0x7f, 0x0a}), 0),
            perms(value(5, "DESC", "Gr\u00fc\u00dfe \u2013 \u00fcn\u00efc\u00f6de \u2713"), true, true, true, true),
            absoluteTtl(value(6, "URL.archive", "https://archive.example.org/1"), ABSOLUTE_TTL),
            value(100, "HS_ADMIN", Encoder.encodeAdminRecord(new AdminRecord(
                    Util.encodeString("0.NA/TEST"), 200,
                    true, true, false, false, true, true, true, true, true, true, true, false))),
        });
        HANDLES.put(H2, new HandleValue[] {
            value(1, "URL", "https://example.org/2"),
        });
        HANDLES.put(ABC, new HandleValue[] {
            value(1, "URL", "https://example.org/abc"),
        });
        HANDLES.put(SECRET, new HandleValue[] {
            value(1, "URL", "https://example.org/secret"),
            perms(value(300, "HS_SECKEY", "s3cret-passw0rd"), true, true, false, false),
        });
        HANDLES.put(ONLY_SECRET, new HandleValue[] {
            perms(value(300, "HS_SECKEY", "hidden-secret"), true, true, false, false),
        });
        HANDLES.put(BIG, new HandleValue[] {
            value(1, "URL", BIG_URL),
            value(2, "BLOB", BIG_BLOB),
        });
        HandleValue[] huge = new HandleValue[HUGE_VALUES];
        for (int i = 0; i < HUGE_VALUES; i++) {
            huge[i] = value(i + 1, "URL", bigUrl(1000));
        }
        HANDLES.put(HUGE, huge);
    }

    /** A copy of the values stored for {@code handle} (in stored order). */
    public static HandleValue[] values(String handle) {
        HandleValue[] v = HANDLES.get(handle);
        if (v == null) {
            throw new IllegalArgumentException("no fixture " + handle);
        }
        HandleValue[] copy = new HandleValue[v.length];
        for (int i = 0; i < v.length; i++) {
            copy[i] = v[i].duplicate();
        }
        return copy;
    }

    /** The stored values of {@code handle} whose index is in {@code indexes}, in stored order. */
    public static HandleValue[] valuesWithIndexes(String handle, int... indexes) {
        List<HandleValue> out = new ArrayList<>();
        for (HandleValue v : values(handle)) {
            if (Arrays.stream(indexes).anyMatch(i -> i == v.getIndex())) {
                out.add(v);
            }
        }
        return out.toArray(new HandleValue[0]);
    }

    /** Writes the import file (one JSON object per line) and returns its path. */
    public static Path writeImportFile(Path dir) throws IOException {
        Gson gson = GsonUtility.getGson();
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, HandleValue[]> e : HANDLES.entrySet()) {
            JsonObject line = new JsonObject();
            line.addProperty("handle", e.getKey());
            JsonArray values = new JsonArray();
            for (HandleValue v : e.getValue()) {
                values.add(gson.toJsonTree(v));
            }
            line.add("values", values);
            sb.append(line).append('\n'); // JsonElement.toString() is compact, one line
        }
        Path file = dir.resolve("import.jsonl");
        Files.write(file, sb.toString().getBytes(StandardCharsets.UTF_8));
        return file;
    }

    private static HandleValue value(int index, String type, String data) {
        return new HandleValue(index, type, data);
    }

    private static HandleValue value(int index, String type, byte[] data) {
        return new HandleValue(index, Util.encodeString(type), data);
    }

    private static HandleValue ttl(HandleValue v, int ttl) {
        v.setTTLType(HandleValue.TTL_TYPE_RELATIVE);
        v.setTTL(ttl);
        return v;
    }

    private static HandleValue absoluteTtl(HandleValue v, int when) {
        v.setTTLType(HandleValue.TTL_TYPE_ABSOLUTE);
        v.setTTL(when);
        return v;
    }

    private static HandleValue perms(HandleValue v, boolean adminRead, boolean adminWrite,
            boolean publicRead, boolean publicWrite) {
        v.setAdminCanRead(adminRead);
        v.setAdminCanWrite(adminWrite);
        v.setAnyoneCanRead(publicRead);
        v.setAnyoneCanWrite(publicWrite);
        return v;
    }

    private static String bigUrl(int length) {
        StringBuilder sb = new StringBuilder("https://example.org/big?q=");
        int i = 0;
        while (sb.length() < length) {
            sb.append((char) ('a' + (i++ % 26)));
        }
        return sb.toString();
    }

    private static byte[] blob(int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (i * 31 + 7);
        }
        return b;
    }
}
