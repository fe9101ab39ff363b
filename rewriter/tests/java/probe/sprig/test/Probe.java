package sprig.test;

import java.util.Map;
import java.util.TreeMap;

/**
 * Test probe runtime: counts entry/exit calls per method id and prints
 * "PROBE id entries exits" lines (ids as unsigned) when the JVM exits.
 */
public final class Probe {
    private static final Map<Long, long[]> COUNTS = new TreeMap<>();
    /** Receiver checks: "site receiver-class" -> count. */
    private static final Map<String, long[]> SITES = new TreeMap<>();
    /** Allocation probes: "site class [length]" -> count. */
    private static final Map<String, long[]> ALLOCS = new TreeMap<>();
    private static boolean hooked;

    private Probe() {}

    private static synchronized long[] slot(int id) {
        if (!hooked) {
            hooked = true;
            Runtime.getRuntime().addShutdownHook(new Thread(Probe::dump));
        }
        return COUNTS.computeIfAbsent(Integer.toUnsignedLong(id), k -> new long[2]);
    }

    public static void entry(int id) {
        synchronized (Probe.class) {
            slot(id)[0]++;
        }
    }

    /** Receiver entry probe: counted under id -2, with the receiver's class checked. */
    public static void receiver(Object r) {
        if (r == null) {
            throw new IllegalStateException("receiver probe got null");
        }
        synchronized (Probe.class) {
            slot(-2)[0]++;
        }
    }

    /** Receiver check before a virtual or interface call: counted per site and receiver class. */
    public static void site(Object r, int site) {
        String k = Integer.toUnsignedString(site) + " " + (r == null ? "null" : r.getClass().getName());
        synchronized (Probe.class) {
            slot(-3)[0]++;
            SITES.computeIfAbsent(k, x -> new long[1])[0]++;
        }
    }

    /** Reach check before a static or special call: counted per site, as receiver "-". */
    public static void reach(int site) {
        String k = Integer.toUnsignedString(site) + " -";
        synchronized (Probe.class) {
            slot(-3)[0]++;
            SITES.computeIfAbsent(k, x -> new long[1])[0]++;
        }
    }

    /** After a {@code new}: counted per site and class. */
    public static void alloc(Class<?> c, int site) {
        String k = Integer.toUnsignedString(site) + " " + c.getName();
        synchronized (Probe.class) {
            slot(-4)[0]++;
            ALLOCS.computeIfAbsent(k, x -> new long[1])[0]++;
        }
    }

    /**
     * After an array allocation: counted per site, class and length; after
     * an instance's {@code Object.clone()}: per site and class.
     */
    public static void allocArray(Object a, int site) {
        String k = Integer.toUnsignedString(site) + " " + a.getClass().getName()
                + (a.getClass().isArray() ? " " + java.lang.reflect.Array.getLength(a) : "");
        synchronized (Probe.class) {
            slot(-4)[0]++;
            ALLOCS.computeIfAbsent(k, x -> new long[1])[0]++;
        }
    }

    /** After a one-dimension array allocation: counted per site and length. */
    public static void allocArrayLength(int length, int site) {
        String k = Integer.toUnsignedString(site) + " length " + length;
        synchronized (Probe.class) {
            slot(-4)[0]++;
            ALLOCS.computeIfAbsent(k, x -> new long[1])[0]++;
        }
    }

    public static void exit(int id) {
        synchronized (Probe.class) {
            slot(id)[1]++;
        }
    }

    private static synchronized void dump() {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Long, long[]> e : COUNTS.entrySet()) {
            sb.append("PROBE ").append(e.getKey()).append(' ').append(e.getValue()[0]).append(' ').append(e.getValue()[1]).append('\n');
        }
        for (Map.Entry<String, long[]> e : SITES.entrySet()) {
            sb.append("SITE ").append(e.getKey()).append(' ').append(e.getValue()[0]).append('\n');
        }
        for (Map.Entry<String, long[]> e : ALLOCS.entrySet()) {
            sb.append("ALLOC ").append(e.getKey()).append(' ').append(e.getValue()[0]).append('\n');
        }
        System.out.print(sb);
        System.out.flush();
    }
}
