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

    private Probe() {}

    public static void enter(int id) {
        if (active != 0) {
            nEnter(id);
        }
    }

    public static void exit(int id) {
        if (active != 0) {
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
