package org.handled.interop;

import java.util.HexFormat;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;

/**
 * Runs in its own JVM (started by {@link ConfigDirClientTest}) with
 * {@code -Dnet.handle.configDir=DIR}: a plain {@code new HandleResolver()} and
 * {@code resolveHandle(...)}, exactly as an application would. Prints one result line per step
 * (tab-separated) for the parent to check.
 */
public final class ConfigDirClientMain {
    private ConfigDirClientMain() {}

    public static void main(String[] args) throws Exception {
        System.out.println("GUARD\t" + NetworkGuard.install());
        HandleResolver resolver = new HandleResolver();
        System.out.println("AUTO_UPDATE\t" + resolver.getConfiguration().isAutoUpdateRootInfo());
        for (String handle : args) {
            long t0 = System.nanoTime();
            try {
                HandleValue[] values = resolver.resolveHandle(handle);
                for (HandleValue v : values) {
                    System.out.println("VALUE\t" + handle + "\t" + v.getIndex() + "\t" + v.getTypeAsString() + "\t"
                            + HexFormat.of().formatHex(v.getData()) + "\t" + v.getTTLType() + "\t" + v.getTTL()
                            + "\t" + v.getPermissionString());
                }
                System.out.println("OK\t" + handle + "\t" + values.length + "\t" + ms(t0));
            } catch (HandleException e) {
                System.out.println("FAIL\t" + handle + "\t" + e.getCode() + "\t" + ms(t0) + "\t"
                        + String.valueOf(e).replace('\t', ' ').replace('\n', ' '));
            }
            System.out.println("BLOCKED\t" + handle + "\t" + NetworkGuard.blocked().size() + "\t"
                    + String.join(" | ", NetworkGuard.blocked()));
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0); // the library leaves non-daemon executor threads behind
    }

    private static long ms(long t0) {
        return (System.nanoTime() - t0) / 1_000_000;
    }
}
