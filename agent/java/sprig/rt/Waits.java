package sprig.rt;

/**
 * The wait probes of {@code --locks}: JVMTI posts no event for
 * {@code LockSupport.park*} or {@code Thread.sleep}, so while a session's
 * lock source runs the agent instruments those methods of the JDK itself
 * with calls here. Defined once per JVM in the bootstrap loader (the JDK's
 * own classes call it), its natives bound on every attach.
 *
 * <p>{@code LockSupport.park(Object)}, {@code parkNanos(Object, long)} and
 * {@code parkUntil(Object, long)} start with {@code parkOn(blocker)}; the
 * park methods without a blocker and the sleep methods start with
 * {@code begin(kind)}; each calls {@code end(kind)} before every return
 * and in a catch-all handler. The kind is sprig's wait kind (3 parked, 4
 * sleeping). The natives record only for a thread inside a root context;
 * elsewhere they return at once. Where {@code Thread.sleep(long)} is
 * native (JDK 17 to 20) the calls of it in the profiled methods go to
 * {@link #sleep(long)} instead.
 */
public final class Waits {
    /** Wait kind of a park (sprig_wire's {@code WaitKind::Parked}). */
    static final int PARKED = 3;

    /** Wait kind of a sleep ({@code WaitKind::Sleeping}). */
    static final int SLEEPING = 4;

    private Waits() {}

    /** Entry of a park method with a blocker. */
    public static void parkOn(Object blocker) {
        nBegin(PARKED, blocker);
    }

    /** Entry of a park method without a blocker or of a sleep method. */
    public static void begin(int kind) {
        nBegin(kind, null);
    }

    /** Every exit of a wait method. */
    public static void end(int kind) {
        nEnd(kind);
    }

    /**
     * Stands in for {@code Thread.sleep(long)} at its call sites in the
     * profiled methods where that method is native (it cannot be
     * instrumented).
     */
    public static void sleep(long millis) throws InterruptedException {
        nBegin(SLEEPING, null);
        try {
            Thread.sleep(millis);
        } finally {
            nEnd(SLEEPING);
        }
    }

    private static native void nBegin(int kind, Object blocker);

    private static native void nEnd(int kind);
}
