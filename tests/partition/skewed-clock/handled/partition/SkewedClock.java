package handled.partition;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.apache.cassandra.utils.Clock;

/**
 * Cassandra's wall clock (the `cassandra.clock` property: Paxos ballots and write
 * timestamps read it) shifted by the milliseconds written in
 * `<cassandra.storagedir>/clock-offset-ms`, read again every 100 ms, so that the
 * partition tests' skew nemesis (tests/partition/cassandra.sh) can step a running
 * node's clock ahead or back as NTP would. The monotonic clock is left alone, as
 * a clock step leaves it. Test only.
 */
public final class SkewedClock implements Clock {
    private static volatile long offsetMs;

    static {
        Path file = Paths.get(System.getProperty("cassandra.storagedir", "."), "clock-offset-ms");
        Thread reader = new Thread(() -> {
            while (true) {
                try {
                    offsetMs = Long.parseLong(Files.readString(file).trim());
                } catch (Exception absentOrPartial) {
                    // No file yet (offset 0) or one being replaced: keep the last offset.
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "handled-skewed-clock");
        reader.setDaemon(true);
        reader.start();
    }

    @Override
    public long nanoTime() {
        return System.nanoTime();
    }

    @Override
    public long currentTimeMillis() {
        return System.currentTimeMillis() + offsetMs;
    }
}
