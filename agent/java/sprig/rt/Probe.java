package sprig.rt;

import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * The probes that sprig injects into profiled methods. Defined once per JVM
 * in the bootstrap loader by the sprig agent, which binds the natives on
 * every attach. Every instrumented method starts with {@code enter(id)} (or
 * {@code rootEnter(id)} for a root) and calls {@code exit(id)} (or
 * {@code rootExit(id)}) before each return and in a catch-all handler.
 *
 * <p>Outside any root context an instrumented method costs one volatile load
 * and a branch while no thread is inside a root context ({@code active}
 * counts them), and a look at its thread's slot of {@code INSIDE} while
 * some other thread is.
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
    /**
     * Root contexts open per thread-id slot: a root probe whose native
     * call opened a context on this thread adds one at the thread's slot,
     * the one that closed it takes one away (the agent says which through
     * the natives' return values). A plain probe calls into the agent only
     * when its thread's slot is non-zero, so an instrumented method that
     * runs outside any root context costs no native call while other
     * threads are inside one (a server profiled on one request path). Two
     * threads sharing a slot only cost each other a native call that
     * returns at once. Cleared by the agent when a session starts.
     */
    static final AtomicIntegerArray INSIDE = new AtomicIntegerArray(1 << 12);

    private Probe() {}

    private static int slot() {
        return (int) Thread.currentThread().getId() & ((1 << 12) - 1);
    }

    /** Whether this thread may be inside a root context. */
    private static boolean inside() {
        return INSIDE.get(slot()) != 0;
    }

    private static boolean live(int id) {
        int w = id >>> 6;
        return w >= LIVE.length || (LIVE[w] & (1L << id)) != 0;
    }

    public static void enter(int id) {
        if (live(id) && active != 0 && inside()) {
            nEnter(id);
        }
    }

    public static void exit(int id) {
        if (live(id) && active != 0 && inside()) {
            nExit(id);
        }
    }

    public static void rootEnter(int id) {
        if (on != 0 && nRootEnter(id) != 0) {
            INSIDE.incrementAndGet(slot());
        }
    }

    public static void rootExit(int id) {
        if (on != 0 && nRootExit(id) != 0) {
            INSIDE.decrementAndGet(slot());
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

    /** Returns 1 when this call opened a root context on this thread. */
    private static native int nRootEnter(int id);

    /** Returns 1 when this call closed this thread's root context. */
    private static native int nRootExit(int id);
}
