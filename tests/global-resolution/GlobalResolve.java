import java.util.HexFormat;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;

/**
 * The official Java client's own global resolution, as an application does it: a plain
 * {@code new HandleResolver()} bootstrapped from {@code bootstrap_handles} in the configuration
 * directory ({@code -Dnet.handle.configDir}), then {@code resolveHandle} of each argument.
 * One tab-separated line per value ({@code VALUE handle index type hex-data}) or failure
 * ({@code FAIL handle code}), then {@code DONE}.
 */
public final class GlobalResolve {
    private GlobalResolve() {}

    public static void main(String[] args) {
        HandleResolver resolver = new HandleResolver();
        for (String handle : args) {
            try {
                for (HandleValue v : resolver.resolveHandle(handle)) {
                    System.out.println("VALUE\t" + handle + "\t" + v.getIndex() + "\t" + v.getTypeAsString() + "\t"
                            + HexFormat.of().formatHex(v.getData()));
                }
            } catch (HandleException e) {
                System.out.println("FAIL\t" + handle + "\t" + e.getCode() + "\t"
                        + String.valueOf(e).replace('\t', ' ').replace('\n', ' '));
            }
        }
        System.out.println("DONE");
        System.out.flush();
        System.exit(0); // the library leaves non-daemon threads behind
    }
}
