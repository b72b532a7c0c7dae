package org.handled.interop;

import java.net.SocketPermission;
import java.security.Permission;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Keeps the Handle client library on 127.0.0.1: any attempt to connect to, send to, accept from
 * or look up a non-loopback host throws a SecurityException at once (so a stray lookup of the
 * public Handle registry fails fast instead of hanging), and is recorded in {@link #blocked()}.
 *
 * <p>Needs {@code -Djava.security.manager=allow} on Java 18+ (the pom passes it); on JVMs where
 * a security manager can't be installed at all it prints a warning and the per-call timeouts
 * are the only protection.
 */
public final class NetworkGuard extends SecurityManager {
    private static final List<String> BLOCKED = new CopyOnWriteArrayList<>();
    private static volatile boolean installed;
    private static volatile String localHostName = "";

    private NetworkGuard() {}

    /** Installs the guard once per JVM. Returns true if it is active. */
    @SuppressWarnings("removal")
    public static synchronized boolean install() {
        if (installed) {
            return true;
        }
        if (System.getSecurityManager() instanceof NetworkGuard) {
            installed = true;
            return true;
        }
        try {
            // Looking up our own host name (InetAddress.getLocalHost) is not network access.
            localHostName = java.net.InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            localHostName = "";
        }
        try {
            System.setSecurityManager(new NetworkGuard());
            installed = true;
        } catch (UnsupportedOperationException | SecurityException e) {
            System.err.println("WARNING: could not install the loopback-only network guard (" + e
                    + "); run with -Djava.security.manager=allow");
        }
        return installed;
    }

    /** Non-loopback network accesses that were refused so far, e.g. "connect 192.0.2.1:2641". */
    public static List<String> blocked() {
        return List.copyOf(BLOCKED);
    }

    @Override
    public void checkPermission(Permission perm) {
        if (perm instanceof SocketPermission) {
            checkSocket((SocketPermission) perm);
        }
    }

    @Override
    public void checkPermission(Permission perm, Object context) {
        checkPermission(perm);
    }

    private static void checkSocket(SocketPermission perm) {
        String actions = perm.getActions();
        if (!(actions.contains("connect") || actions.contains("resolve") || actions.contains("accept"))) {
            return; // listen: binding local sockets is fine
        }
        String host = hostOf(perm.getName());
        if (isLoopback(host)) {
            return;
        }
        String what = actions + " " + perm.getName();
        BLOCKED.add(what);
        throw new SecurityException("interop tests allow loopback only; refused " + what);
    }

    static String hostOf(String name) {
        if (name.startsWith("[")) {
            int end = name.indexOf(']');
            return end < 0 ? name.substring(1) : name.substring(1, end);
        }
        int colon = name.indexOf(':');
        if (colon >= 0 && name.indexOf(':', colon + 1) < 0) {
            return name.substring(0, colon); // host:port (not a bare IPv6 literal)
        }
        return name;
    }

    static boolean isLoopback(String host) {
        String h = host.toLowerCase(java.util.Locale.ROOT);
        return h.isEmpty()
                || h.equalsIgnoreCase(localHostName)
                || h.equals("localhost")
                || h.startsWith("127.")
                || h.equals("::1")
                || h.equals("0:0:0:0:0:0:0:1")
                || h.equals("0.0.0.0") // wildcard bind address reported by some socket calls
                || h.equals("*");
    }
}
