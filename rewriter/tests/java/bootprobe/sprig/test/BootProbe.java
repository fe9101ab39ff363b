package sprig.test;

/**
 * Probe patched into java.base: must not call any method (every JDK method
 * is instrumented, a call would recurse), so it only bumps counters. Counts
 * of concurrent threads may race; tests use them only as "probes ran".
 */
public final class BootProbe {
    public static final long[] ENTRIES = new long[1 << 16];
    public static final long[] EXITS = new long[1 << 16];

    private BootProbe() {}

    public static void entry(int id) {
        ENTRIES[id & 0xffff]++;
    }

    public static void exit(int id) {
        EXITS[id & 0xffff]++;
    }
}
