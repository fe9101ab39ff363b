package sprig.rt;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The probes that sprig injects into profiled methods, for JDK 22 and
 * later: the same class, fields and natives as the JDK 8+ variant
 * (java/sprig/rt/Probe.java), plus a fast path. Each probe first calls the
 * agent through an FFM downcall handle linked with
 * {@code Linker.Option.critical(false)} (no JNIEnv, no thread-state
 * transition); when that returns non-zero (a first call to reveal, a thread
 * to register, a full buffer, a panic) it calls the JNI native as the
 * JDK 8+ variant always does.
 *
 * <p>If the handles cannot be linked (native access denied, no linker) the
 * class initialises anyway with {@code FAST} false and uses JNI only.
 *
 * <p>As in the JDK 8+ variant, {@code enter} and {@code exit} check
 * {@code active}, then take the Java path on a thread that owns its slot of
 * the agent's table, or look at its slot of {@code INSIDE} otherwise; what
 * the Java path does not record goes to the agent, which tells revealed
 * methods from dormant ones.
 */
public final class Probe {
    /**
     * Number of threads currently inside a root context (written by the
     * agent). A plain field, not a volatile one: it only lets the probes of
     * a thread outside every root context skip the rest, and a stale value
     * costs no correctness. The thread that matters sees its own change in
     * time: its root probe raises the count in a native call, and the JIT
     * moves no load across a call, so every probe after its root entry
     * reads the raised count; a thread outside every root context that
     * reads a stale raised count finds its slot closed, one that reads a
     * stale zero has nothing to record. A volatile read's acquire barrier
     * also held every later memory access of the method it was inlined
     * into behind it: javac {@code Gen::genClass} at its plateau (JDK 17)
     * ran at 1.53-1.62 of bare with the plain field (median 1.58), 1.62-1.65
     * with the volatile one (median 1.63; docs/overhead.md, "javac at its
     * plateau").
     *
     * <p>Negative (-1) while the call-edge bursts' counting window is open,
     * in a session that opens no root context: the entry probes add one to
     * their thread's slot of {@link #COUNTS}, the other probes do nothing.
     */
    static int active;
    /** Non-zero while a profiling session is on (written by the agent). */
    static volatile int on;
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
     *
     * <p>A plain {@code int[]}, read with a plain load: a thread always
     * sees its own updates, and an array load costs the same in the
     * interpreter, C1 and C2 code (an {@code AtomicIntegerArray} read goes
     * through a VarHandle, which costs a chain of calls in code the JIT has
     * not optimised yet: a profiled Jetty request path ran at half speed).
     * Updates, once per root context, take {@code INSIDE_LOCK}, so two
     * threads sharing a slot never lose one.
     */
    static final int[] INSIDE = new int[1 << 12];

    private static final Object INSIDE_LOCK = new Object();

    private static final int SLOT_MASK = (1 << 12) - 1;

    /**
     * Root calls made on virtual threads while a session was on that the
     * agent did not profile ({@code nVirtual} answered 0: the JVM's virtual
     * threads cannot be followed from carrier to carrier, or the session
     * times with thread CPU time). Counted here (under
     * {@code INSIDE_LOCK}); the agent zeroes it when a session starts and
     * reports it at the end.
     */
    static long virtualRoots;

    /** Whether the fast path is linked (read by the agent). */
    static final boolean FAST;

    private static final MethodHandle ENTER;
    private static final MethodHandle EXIT;
    private static final MethodHandle ROOT_ENTER;
    private static final MethodHandle ROOT_EXIT;

    static {
        MethodHandle[] h = new MethodHandle[4];
        boolean fast = false;
        try {
            Linker linker = Linker.nativeLinker();
            FunctionDescriptor fd = FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT);
            Linker.Option critical = Linker.Option.critical(false);
            for (int i = 0; i < h.length; i++) {
                long address = fastAddress(i);
                if (address == 0) {
                    throw new IllegalStateException("no fast probe " + i);
                }
                h[i] = linker.downcallHandle(MemorySegment.ofAddress(address), fd, critical);
            }
            fast = true;
        } catch (Throwable t) {
            h = new MethodHandle[4];
        }
        FAST = fast;
        ENTER = h[0];
        EXIT = h[1];
        ROOT_ENTER = h[2];
        ROOT_EXIT = h[3];
    }

    private Probe() {}

    private static int slot() {
        return (int) Thread.currentThread().threadId() & (SLOT_MASK);
    }

    /**
     * Sampled timing's Java path (the agent's {@code ffi/slots.rs} and
     * docs/sampled-timing.md): the address of the slot table the agent
     * maps for the life of the JVM, 0 when there is none or
     * {@code jdk.internal.misc} is not exported to this class (the agent
     * exports it with JVMTI before the class initialises). Slot
     * {@code id & SLOT_MASK} of 64 bytes: the owner thread's id while the
     * slot is open (+0), one word holding the next position in the ring
     * segment the thread owns (low half) and its root-context depth (high
     * half) (+8), the segment's capacity (+16) and the address of its event
     * slot 0 (+24), 48 bytes after its {@code committed} count. After the
     * slots, a bitmap of the method ids the Java path may record
     * (revealed, first call handled).
     *
     * <p>A probe on an open slot of its own thread records the event
     * itself, exactly as the agent would: the 16-byte event (no
     * timestamp: sampled timing reads no clock inside a root context) at
     * the position, then the new count with a release store; anything
     * else (a closed or shared slot, a dormant or first-called method, a
     * full segment) returns false and the probe takes the native path.
     * The position is checked against the capacity read from the same
     * slot, so nothing is written outside the thread's segment.
     */
    private static final long TABLE;

    private static final long IDS;

    private static final jdk.internal.misc.Unsafe U;

    private static final long ENTRY_KIND = 1L << 32;

    private static final long EXIT_KIND = 2L << 32;

    /**
     * The allocation probes' part of the slot table (after the bitmap):
     * per allocation site id below {@code 1 << 18} an int, 0 while the
     * Java path cannot record the site (the agent records it), the
     * instance size in bytes of a {@code new} site once the agent learned
     * it, {@code -1 - type} for a one-dimension array site of element type
     * {@code type}; then per array element type ({@link #lengthBytes}) the
     * layout the agent learned from {@code GetObjectSize} on arrays of
     * that type: base offset, element size and alignment mask, 0 while
     * unknown.
     */
    private static final long SITES;

    private static final long LAYOUTS;

    /**
     * The kind of a one-object allocation event (wire {@code Alloc}: event
     * kind 9, the site in the id, the bytes where other events have their
     * clock reading).
     */
    private static final long ALLOC_KIND = 9L << 32;

    static {
        long t = 0;
        jdk.internal.misc.Unsafe u = null;
        try {
            t = nTable();
            if (t != 0) {
                u = jdk.internal.misc.Unsafe.getUnsafe();
            }
        } catch (Throwable e) {
            // no slot table, or the package is not exported: native path only
            u = null;
        }
        U = u;
        TABLE = u == null ? 0 : t;
        IDS = TABLE + ((long) (SLOT_MASK + 1) << 6);
        SITES = IDS + (1L << 17);
        LAYOUTS = SITES + (1L << 20);
    }

    /**
     * Whether thread {@code t}'s slot is open for it: the first check a
     * probe pays, small enough to inline everywhere, with the rest of the
     * Java path behind it. An open slot holds the thread's root-context
     * depth, so a probe that finds its slot open does not read
     * {@code INSIDE} (one load fewer: 0.6 ns of a pair here); under exact
     * timing or on a shared slot the probe reads {@code INSIDE} as before.
     */
    private static boolean mine(long t) {
        return U.getLong(TABLE + ((t & SLOT_MASK) << 6)) == t;
    }

    /** The Java path of {@code enter} on an open slot of its own thread. */
    private static boolean javaEnter(long t, int id) {
        jdk.internal.misc.Unsafe u = U;
        long e = TABLE + ((t & SLOT_MASK) << 6);
        long w = u.getLong(e + 8);
        if ((w >>> 32) == 0) {
            return true;
        }
        if ((id >>> 20) != 0 || (u.getLong(IDS + ((id >>> 6) << 3)) & (1L << id)) == 0) {
            return false;
        }
        int p = (int) w;
        if (p >= u.getInt(e + 16)) {
            return false;
        }
        long b = u.getLong(e + 24);
        long a = b + ((long) p << 4);
        u.putLong(a, 0L);
        u.putLong(a + 8, ENTRY_KIND | id);
        u.putLong(e + 8, w + (1L << 32) + 1);
        u.putIntRelease(null, b - 48, p + 1);
        return true;
    }

    /** The Java path of {@code exit} on an open slot of its own thread. */
    private static boolean javaExit(long t, int id) {
        jdk.internal.misc.Unsafe u = U;
        long e = TABLE + ((t & SLOT_MASK) << 6);
        long w = u.getLong(e + 8);
        if ((w >>> 32) <= 1) {
            return true;
        }
        if ((id >>> 20) != 0 || (u.getLong(IDS + ((id >>> 6) << 3)) & (1L << id)) == 0) {
            return false;
        }
        int p = (int) w;
        if (p >= u.getInt(e + 16)) {
            return false;
        }
        long b = u.getLong(e + 24);
        long a = b + ((long) p << 4);
        u.putLong(a, 0L);
        u.putLong(a + 8, EXIT_KIND | id);
        u.putLong(e + 8, w + 1 - (1L << 32));
        u.putIntRelease(null, b - 48, p + 1);
        return true;
    }

    /** The address of the agent's slot table for the Java path, 0 for none. */
    private static native long nTable();

    public static void enter(int id) {
        int a = active;
        if (a > 0) {
            long t = Thread.currentThread().threadId();
            if (TABLE != 0 && mine(t)) {
                if (javaEnter(t, id)) {
                    return;
                }
            } else if (INSIDE[(int) t & SLOT_MASK] == 0) {
                return;
            }
            if (!FAST || fastEnter(id) != 0) {
                nEnter(id);
            }
        } else if (a < 0) {
            count(Thread.currentThread().threadId());
        }
    }

    public static void exit(int id) {
        if (active > 0) {
            long t = Thread.currentThread().threadId();
            if (TABLE != 0 && mine(t)) {
                if (javaExit(t, id)) {
                    return;
                }
            } else if (INSIDE[(int) t & SLOT_MASK] == 0) {
                return;
            }
            if (!FAST || fastExit(id) != 0) {
                nExit(id);
            }
        }
    }

    public static void rootEnter(int id) {
        if (on == 0) {
            return;
        }
        if (Thread.currentThread().isVirtual() && !followVirtual()) {
            synchronized (INSIDE_LOCK) {
                virtualRoots++;
            }
            return;
        }
        // The fast path never opens a root context.
        if ((!FAST || fastRootEnter(id) != 0) && nRootEnter(id) != 0) {
            synchronized (INSIDE_LOCK) {
                INSIDE[slot()]++;
            }
        }
    }

    public static void rootExit(int id) {
        if (on == 0) {
            return;
        }
        // The fast path records only the exit of a nested root; closing the
        // root context (and lowering active) takes the JNI path.
        if (FAST && fastRootExit(id) == 0) {
            return;
        }
        int r = nRootExit(id);
        if (r == BURST_FIRST) {
            burst();
            r = nRootExit(id);
        }
        if (r != 0) {
            synchronized (INSIDE_LOCK) {
                INSIDE[slot()]--;
            }
        }
    }

    /**
     * What {@code nRootExit} returns when the thread is due for a
     * calibration burst before it closes its root context (1: closed, 0:
     * not): the probe class runs the burst, then calls {@code nRootExit}
     * again, which closes the context. The agent looks for
     * {@code BURST_CALLS} to know that this probe class does so.
     */
    private static final int BURST_FIRST = 3;

    /** Calls of the calibration class's empty method in one burst. */
    static final int BURST_CALLS = 32;

    /**
     * A calibration burst at the end of a root call, inside its root
     * context: the agent asks for one now and then (every 10 ms per thread
     * by default), and the CCT builder measures the probes' cost from its
     * calls, on this thread right after the root's own code ran, then
     * leaves the burst out of the profile. The calibration class is the
     * agent's, instrumented like user code; nothing it throws may reach
     * the user's code.
     */
    private static void burst() {
        try {
            Calibration.burst(BURST_CALLS);
        } catch (Throwable t) {
            // e.g. StackOverflowError: the burst is only lost
        }
    }

    private static int fastEnter(int id) {
        try {
            return (int) ENTER.invokeExact(id);
        } catch (Throwable t) {
            return 1;
        }
    }

    private static int fastExit(int id) {
        try {
            return (int) EXIT.invokeExact(id);
        } catch (Throwable t) {
            return 1;
        }
    }

    private static int fastRootEnter(int id) {
        try {
            return (int) ROOT_ENTER.invokeExact(id);
        } catch (Throwable t) {
            return 1;
        }
    }

    private static int fastRootExit(int id) {
        try {
            return (int) ROOT_EXIT.invokeExact(id);
        } catch (Throwable t) {
            return 1;
        }
    }

    /** The address of fast probe {@code which} (0 enter, 1 exit, 2 rootEnter, 3 rootExit). */
    private static native long fastAddress(int which);

    /**
     * The reflective targets handed to the agent in the current session,
     * by identity: the {@code Method} and {@code Constructor} objects whose
     * {@code nReflected} answered 1: in the lower half, two slots per
     * identity hash (the latest first); in the upper half, 16 slots per
     * thread-id slot (a cache line of its own with compressed references),
     * the first two holding the objects that thread's calls found last
     * (the latest first), checked before the hash. A fresh array per session, set by the agent when the
     * session starts (before any root context of it opens) and cleared to
     * null when it ends, so no entry outlives its session and none keeps a
     * class from unloading; a store racing the end lands in an array
     * nobody reads any more. Null also while the agent could not bind
     * {@code nReflected}: every call then goes to {@code nReflect}.
     *
     * <p>Identity, not equality: {@code Method.equals} and
     * {@code hashCode} are Java code the session may have instrumented,
     * and calling them here would add calls to the profile. A caller that
     * keeps its {@code Method} object (Groovy's {@code CachedMethod},
     * frameworks' handler tables) is answered here; one that looks the
     * method up before every call gets a fresh copy each time, which goes
     * to the agent and is answered there from its table of methods.
     *
     * <p>The thread's own slots come first because
     * {@code System.identityHashCode} has a runtime call on its slow path:
     * with it on every call, C2 no longer removed the boxes of a constant
     * {@code Method}'s argument and result once it folded the invoke
     * (JDK 25: 16 bytes allocated a call, 3-8 ns a call more than bare;
     * docs/revelation.md, "What reflective calls cost"). A call that finds
     * its object in its thread's slots reads no hash.
     */
    static volatile Object[] REFLECTED;

    /**
     * Entry of {@code java.lang.reflect.Method.invoke} and
     * {@code Constructor.newInstance} while a session watches reflection:
     * on a thread inside a root context, hands the reflected method to the
     * agent, which instruments the target (when it belongs to the profiled
     * subgraph) before it runs, unless this session handed it over already
     * ({@link #REFLECTED}).
     */
    public static void reflect(Object method) {
        if (active <= 0) {
            return;
        }
        int t = (int) Thread.currentThread().threadId();
        if (INSIDE[t & SLOT_MASK] != 0) {
            Object[] seen = REFLECTED;
            if (seen == null) {
                nReflect(method);
                return;
            }
            // The pair (j, j + 1) of this thread's slot in the upper half
            // (16 slots apart, so that threads do not write into each
            // other's cache lines), the pair (k, k + 1) of the hash in the
            // lower half, each the latest two.
            int half = seen.length >>> 1;
            int j = half + ((t << 4) & (half - 16));
            if (seen[j] == method || seen[j + 1] == method) {
                return;
            }
            int k = System.identityHashCode(method) & (half - 2);
            if (seen[k] != method && seen[k + 1] != method) {
                if (nReflected(method) == 0) {
                    return;
                }
                seen[k + 1] = seen[k];
                seen[k] = method;
            }
            seen[j + 1] = seen[j];
            seen[j] = method;
        }
    }

    /** The exit probe paired with {@link #reflect}: nothing to record. */
    public static void reflectExit(int id) {}

    /**
     * Entries counted per thread-id slot ({@code COUNTS[slot << 3]}, a
     * cache line per slot) while {@code active} is negative: the call-edge
     * bursts' counting windows ({@code sprig sample --edges}), in which
     * an entry probe adds one here and calls nothing, so that the rate of
     * entries is taken where they run, without a call into the agent per
     * entry. Allocated by the agent when call-edge bursts start in this
     * JVM and none is there yet (null until then); only the agent reads it.
     */
    static long[] COUNTS;

    /** An entry while the counting window is open (see {@link #COUNTS}). */
    private static void count(long t) {
        long[] c = COUNTS;
        if (c != null) {
            c[((int) t & SLOT_MASK) << 3]++;
        }
    }

    /**
     * Receiver classes per watched call site (the agent's site ids), two
     * per site ({@code RECEIVERS[2 * site]} the latest): the classes last
     * handed to the agent at that site, or the array itself in the first
     * slot once the agent watches the site no more. Allocated by the agent
     * for the first profiling session that checks receivers (null until then),
     * written here, cleared by the agent when a session starts and ends.
     */
    static Object[] RECEIVERS;

    /**
     * Receiver check before a virtual or interface call of a profiled
     * method (site ids below {@code RECEIVERS.length / 2}, handed out by the
     * agent). Inside a root context, a receiver of a class this site has
     * not just seen goes to the agent, which instruments the method that
     * class selects before the call runs. Outside root contexts: one
     * load of {@code active}, as the plain probes.
     */
    public static void site(Object receiver, int site) {
        Object[] seen = RECEIVERS;
        if (active > 0
                && seen != null
                && receiver != null
                && INSIDE[(int) Thread.currentThread().threadId() & SLOT_MASK] != 0) {
            int k = site << 1;
            Class<?> c = receiver.getClass();
            Object last = seen[k];
            if (last != c && last != seen && seen[k + 1] != c) {
                int r = nSite(site, c);
                if (r == 0) {
                    seen[k + 1] = last;
                    seen[k] = c;
                } else if (r == 1) {
                    seen[k] = seen;
                }
            }
        }
    }

    /**
     * Reach check before a static or special call of a profiled method into
     * profiled code: the first time the site runs inside a root context,
     * the agent instruments its target before the call runs; then the site
     * is marked done in {@code RECEIVERS}.
     */
    public static void reach(int site) {
        Object[] seen = RECEIVERS;
        if (active > 0 && seen != null) {
            int k = site << 1;
            if (seen[k] != seen
                    && INSIDE[(int) Thread.currentThread().threadId() & SLOT_MASK] != 0
                    && nSite(site, null) == 1) {
                seen[k] = seen;
            }
        }
    }

    /**
     * Returns 0 when the agent instrumented what the class reaches, 1 when
     * it watches this site no more, 2 when it did nothing (ask again).
     */
    private static native int nSite(int site, Class<?> receiver);

    /**
     * Hands a reflective call's target to the agent; bound by every sprig
     * (older agents bind only this one).
     */
    private static native void nReflect(Object method);

    /**
     * {@link #nReflect}, returning 1 when the target is handed over in the
     * current session (now or before), 0 when it is not (the thread is not
     * inside a root context, no session, the agent could not name it).
     */
    private static native int nReflected(Object method);

    private static native void nEnter(int id);

    /**
     * Allocation probe right after a {@code new} of a profiled method
     * ({@code sprig profile --alloc}): {@code c} is the class the
     * {@code new} names (the new object is not initialised yet and cannot
     * be passed). On a thread inside a root context one allocation at
     * {@code site} goes into the thread's stream, where it belongs to the
     * method open there: written in Java on an open slot once the agent
     * learned the site's instance size ({@link #javaAlloc}), by the agent
     * otherwise. Outside root contexts: one load of {@code active}, as the
     * plain probes.
     */
    public static void alloc(Class<?> c, int site) {
        if (active > 0) {
            long t = Thread.currentThread().threadId();
            if (TABLE != 0 && mine(t)) {
                if (!javaAlloc(t, site, instanceBytes(site))) {
                    nAlloc(c, site);
                }
            } else if (INSIDE[(int) t & SLOT_MASK] != 0) {
                nAlloc(c, site);
            }
        }
    }

    /**
     * Allocation probe right after a {@code newarray}, {@code anewarray}
     * or {@code multianewarray} of one dimension in a profiled method:
     * {@code length} is the new array's length. The probe never gets the
     * array: passed on to the agent's native, a local array would escape
     * and C2 could no longer scalar-replace it. The Java path weighs the
     * array from its length and the layout of the site's element type
     * ({@link #lengthBytes}); the agent does what it cannot.
     */
    public static void allocArrayLength(int length, int site) {
        if (active > 0) {
            long t = Thread.currentThread().threadId();
            if (TABLE != 0 && mine(t)) {
                if (!javaAlloc(t, site, lengthBytes(length, site))) {
                    nAllocLength(length, site);
                }
            } else if (INSIDE[(int) t & SLOT_MASK] != 0) {
                nAllocLength(length, site);
            }
        }
    }

    /**
     * Allocation probe right after a {@code multianewarray} of two
     * dimensions or more in a profiled method: {@code a} is the new array,
     * which the agent weighs with the arrays inside it (a probe class an
     * older sprig defined calls it after every array allocation).
     */
    public static void allocArray(Object a, int site) {
        if (active > 0) {
            long t = Thread.currentThread().threadId();
            if (TABLE != 0 && mine(t)) {
                if (!javaCopy(t, a, site)) {
                    nAlloc(a, site);
                }
            } else if (INSIDE[(int) t & SLOT_MASK] != 0) {
                nAlloc(a, site);
            }
        }
    }

    /**
     * Where the copies made at each {@code clone()} site are recorded, by
     * the copy's class: two entries per site id below
     * {@code COPIES.length / 2} ({@code COPIES[2 * site]} the latest), each
     * an {@code Object[]} of the class and an {@code int[]} holding the id
     * of the site its copies are recorded at plus one, which the agent
     * weighs for the Java path ({@link #copyBytes}). Filled here from what
     * {@code nCopy} answers; a fresh array per session, set by the agent
     * when the session starts with {@code --alloc} and cleared to null when
     * it ends (null also while the agent could not bind {@code nCopy}: every
     * copy then goes to {@code nAlloc}). An entry is never changed once
     * stored; one read before its elements are seen (null, 0) is a miss.
     */
    static volatile Object[] COPIES;

    /**
     * {@link #allocArray} on an open slot of its own thread: a copy whose
     * class this site has just seen is recorded in Java at the site the
     * agent named for that class; any other copy, and a
     * {@code multianewarray}, goes to the agent ({@code nCopy}), which
     * records it and names the site for the next copies of its class when
     * the Java path can weigh them. False when the agent is to record it
     * with {@code nAlloc} (no table of copies, a full segment).
     */
    private static boolean javaCopy(long t, Object a, int site) {
        Object[] seen = COPIES;
        int k = site << 1;
        if (seen == null || a == null || k < 0 || k + 1 >= seen.length) {
            return javaAlloc(t, site, 0);
        }
        Class<?> c = a.getClass();
        int at = copyAt(seen[k], c);
        if (at < 0) {
            at = copyAt(seen[k + 1], c);
        }
        if (at >= 0) {
            return javaAlloc(t, at, copyBytes(a, at));
        }
        if (javaAlloc(t, site, 0)) {
            // outside a root context, or paused: nothing to record
            return true;
        }
        int r = nCopy(a, site);
        if (r >= 0 && r < (1 << 18)) {
            seen[k + 1] = seen[k];
            seen[k] = new Object[] {c, new int[] {r + 1}};
        }
        return true;
    }

    /** The site copies of class {@code c} are recorded at by entry {@code e}, -1 for none. */
    private static int copyAt(Object e, Class<?> c) {
        if (!(e instanceof Object[])) {
            return -1;
        }
        Object[] p = (Object[]) e;
        if (p.length != 2 || p[0] != c || !(p[1] instanceof int[])) {
            return -1;
        }
        int[] n = (int[]) p[1];
        return n.length == 1 ? n[0] - 1 : -1;
    }

    /**
     * The bytes of copy {@code a} recorded at site {@code at}: the
     * instance size the agent learned for the site, or the array's from
     * its length and the site's element type; 0 when the agent must weigh it.
     */
    private static long copyBytes(Object a, int at) {
        if ((at >>> 18) != 0) {
            return 0;
        }
        int w = U.getInt(SITES + ((long) at << 2));
        if (w > 0) {
            return w;
        }
        return w < 0 ? lengthBytes(java.lang.reflect.Array.getLength(a), at) : 0;
    }

    /**
     * What the Java path does with an allocation inside a root context: 1
     * records it as one {@code Alloc} event, which the reader of the
     * session's ring knows to read; 2 records nothing (the off turns of the
     * agent's measurement knob {@code exact-alloc-duty}, what the exact
     * path costs, measured in turns within one session); 0 leaves it to the
     * agent. Set by the agent when an {@code --alloc} session starts and
     * back to 0 when it ends: an agent that does not know the field (an
     * older sprig's, attached later to this JVM) gets every allocation
     * through its own natives, in the form its reader knows. Read only on a
     * thread inside a root context.
     */
    static volatile int allocJava;

    /** The instance size the agent learned for a {@code new} site, 0 before. */
    private static long instanceBytes(int site) {
        return (site >>> 18) != 0 ? 0 : U.getInt(SITES + ((long) site << 2));
    }

    /**
     * The bytes of a one-dimension array of {@code n} elements allocated
     * at {@code site}: {@code (base + n * scale + mask) & ~mask} with the
     * layout the agent learned for the element type the site's word names
     * ({@code -1 - type}); 0 when the agent must weigh it (not an array
     * site of one dimension, a type not learned yet).
     */
    private static long lengthBytes(int n, int site) {
        if ((site >>> 18) != 0) {
            return 0;
        }
        int w = U.getInt(SITES + ((long) site << 2));
        if (w >= 0 || w < -16) { // 16 element types (slots.rs ARRAY_TYPES)
            return 0;
        }
        long l = U.getLong(LAYOUTS + ((long) (-1 - w) << 3));
        if (l == 0) {
            return 0;
        }
        long m = l >>> 32;
        return ((l & 0xffff) + n * ((l >>> 16) & 0xffff) + m) & ~m;
    }

    /**
     * The Java path of the allocation probes on an open slot of its own
     * thread: one {@code Alloc} event, one object of {@code bytes} at
     * {@code site} (one slot, half of the agent's {@code RECORD_ALLOC}
     * record); false (the agent records it) when the bytes are unknown,
     * the segment is full or the agent did not ask for the Java path
     * ({@link #allocJava}). Nothing outside a root context, nor paused.
     */
    private static boolean javaAlloc(long t, int site, long bytes) {
        jdk.internal.misc.Unsafe u = U;
        long e = TABLE + ((t & SLOT_MASK) << 6);
        long w = u.getLong(e + 8);
        if ((w >>> 32) == 0) {
            return true;
        }
        int m = allocJava;
        if (m != 1) {
            return m == 2;
        }
        if (bytes <= 0) {
            return false;
        }
        int p = (int) w;
        if (p >= u.getInt(e + 16)) {
            return false;
        }
        long b = u.getLong(e + 24);
        long a = b + ((long) p << 4);
        u.putLong(a, bytes);
        u.putLong(a + 8, ALLOC_KIND | (site & 0xffffffffL));
        u.putLong(e + 8, w + 1);
        u.putIntRelease(null, b - 48, p + 1);
        return true;
    }

    /**
     * Records an allocation at {@code site}: of class {@code o} after a
     * {@code new}, the array {@code o} after an array allocation.
     */
    private static native void nAlloc(Object o, int site);

    /**
     * Records a copy {@code o} made at {@code site} (or the array of a
     * {@code multianewarray} there) as {@link #nAlloc} does, and returns
     * the id of the site further copies of its class are recorded at when
     * the Java path can weigh them ({@link #COPIES}), -1 otherwise.
     */
    private static native int nCopy(Object o, int site);

    /**
     * Records an allocation at {@code site} of a one-dimension array of
     * {@code length} elements.
     */
    private static native void nAllocLength(int length, int site);

    private static native void nExit(int id);

    /**
     * On a virtual thread, before its root probe: whether the agent
     * profiles it (its probe state is the virtual thread's own from now on
     * and follows it from carrier to carrier).
     */
    private static boolean followVirtual() {
        try {
            return nVirtual() != 0;
        } catch (LinkageError e) {
            // an agent that does not bind it
            return false;
        }
    }

    /** Returns 1 when the agent profiles this virtual thread's root calls. */
    private static native int nVirtual();

    /** Returns 1 when this call opened a root context on this thread. */
    private static native int nRootEnter(int id);

    /** Returns 1 when this call closed this thread's root context. */
    private static native int nRootExit(int id);
}
