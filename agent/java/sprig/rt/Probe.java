package sprig.rt;

/**
 * The probes that sprig injects into profiled methods. Defined once per JVM
 * in the bootstrap loader by the sprig agent, which binds the natives on
 * every attach. Every instrumented method starts with {@code enter(id)} (or
 * {@code rootEnter(id)} for a root) and calls {@code exit(id)} (or
 * {@code rootExit(id)}) before each return and in a catch-all handler.
 *
 * <p>Outside any root context an instrumented method costs one volatile load
 * and a branch: {@code active} counts the threads inside a root context.
 */
public final class Probe {
    /** Number of threads currently inside a root context (written by the agent). */
    static volatile int active;
    /** Non-zero while a profiling session is on (written by the agent). */
    static volatile int on;
    /**
     * Which method ids record: bit {@code id % 64} of {@code LIVE[id / 64]},
     * written by the agent. A dormant probe (a method of a redefined class
     * that revelation has not reached) stops here, in Java, instead of
     * calling into the agent. Read after {@code active}, a volatile read,
     * so the JIT cannot keep a stale word across calls. Ids past the array
     * always record.
     *
     * <p>Checked before {@code active}: a dormant probe is then one plain
     * load and a test, with no volatile read to stop the JIT moving other
     * loads around it. (Compiled code may reuse a word it loaded earlier
     * within one loop; a method activates when revelation first reaches
     * it, before the calls that lead to it run, so such a loop is on a path
     * revelation missed.)
     */
    static final long[] LIVE = new long[1 << 14];

    private Probe() {}

    private static boolean live(int id) {
        int w = id >>> 6;
        return w >= LIVE.length || (LIVE[w] & (1L << id)) != 0;
    }

    public static void enter(int id) {
        if (live(id) && active != 0) {
            nEnter(id);
        }
    }

    public static void exit(int id) {
        if (live(id) && active != 0) {
            nExit(id);
        }
    }

    public static void rootEnter(int id) {
        if (on != 0) {
            nRootEnter(id);
        }
    }

    public static void rootExit(int id) {
        if (on != 0) {
            nRootExit(id);
        }
    }

    /**
     * Entry of {@code java.lang.reflect.Method.invoke} and
     * {@code Constructor.newInstance} while a session watches reflection:
     * hands the reflected method to the agent, which instruments the target
     * (when it belongs to the profiled subgraph) before it runs.
     */
    public static void reflect(Object method) {
        if (active != 0) {
            nReflect(method);
        }
    }

    /** The exit probe paired with {@link #reflect}: nothing to record. */
    public static void reflectExit(int id) {}

    private static native void nReflect(Object method);

    private static native void nEnter(int id);

    private static native void nExit(int id);

    private static native void nRootEnter(int id);

    private static native void nRootExit(int id);
}
