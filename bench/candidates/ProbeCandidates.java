/*
 * How much a probe pair costs by the way it records an event, measured in a
 * plain JVM with no agent (scripts/measure/probe-candidates.sh builds and runs it):
 *   jni        a JNI native storing a 16-byte event with no clock read
 *   jni+rdtsc  the same with an rdtsc per event (exact timing's probe)
 *   unsafe     pure Java: the thread's slot found from its id, the event
 *              stored into native memory with Unsafe, the count published
 *              with a release store (a candidate for sampled timing)
 *   slot       sampled timing's Java probe as shipped (agent/java/sprig/rt/
 *              Probe.java): owner, depth, method bit, capacity and segment
 *              read from a native slot table
 *   slot8      the same writing 8-byte events (no timestamp word)
 *   tree       no event stream: each thread keeps its calling context tree
 *              in native memory, a table of 16-byte nodes (key = parent
 *              node and method id, exact call count) found by hashing;
 *              the slot holds the thread's current node and depth, which
 *              position samples would read as they read the stream
 *              position now.
 *              An entry finds the child and counts the call, an exit goes
 *              back to the parent (a design sprig does not ship: what its
 *              probe pair would cost)
 * around a tiny method, against the bare loop and System.nanoTime().
 * -Dbuffer.mib=N sizes the buffers the events go round (default 1): at 1
 * MiB they stay in the core's cache, at 32 or 64 MiB (sprig's ring) every
 * line is fetched again before it is written, as in a profiled JVM.
 */
import jdk.internal.misc.Unsafe;

public class ProbeCandidates {
    static final Unsafe U = Unsafe.getUnsafe();
    static final int SLOTS = 1 << 12, MASK = SLOTS - 1;
    static final long[] BASE = new long[SLOTS];   // native buffer address per slot
    static final int[] POS = new int[SLOTS];      // write index per slot (events)
    static final int CAP = Integer.getInteger("buffer.mib", 1) << 16; // 16-byte events per buffer
    static volatile int active = 1;
    static final int[] INSIDE = new int[SLOTS];
    static long sink;

    static native void nEnter(int id);
    static native void nExit(int id);
    static native void nEnterTsc(int id);
    static native void nExitTsc(int id);

    // Unsafe probe: plain stores of the event, then an ordered (release) store of the count
    static void uEnter(int id) {
        if (active != 0) {
            int s = (int) Thread.currentThread().getId() & MASK;
            if (INSIDE[s] != 0) {
                long b = BASE[s];
                int p = POS[s];
                if (p < CAP) {
                    U.putLong(b + 64 + ((long) p << 4), 0L);
                    U.putLong(b + 72 + ((long) p << 4), ((long) 1 << 32) | id);
                    POS[s] = p + 1;
                    U.putIntRelease(null, b, p + 1);
                } else {
                    POS[s] = 0; // stand-in for "segment full: call the agent"
                }
            }
        }
    }
    static void uExit(int id) {
        if (active != 0) {
            int s = (int) Thread.currentThread().getId() & MASK;
            if (INSIDE[s] != 0) {
                long b = BASE[s];
                int p = POS[s];
                if (p < CAP) {
                    U.putLong(b + 64 + ((long) p << 4), 0L);
                    U.putLong(b + 72 + ((long) p << 4), ((long) 2 << 32) | id);
                    POS[s] = p + 1;
                    U.putIntRelease(null, b, p + 1);
                } else {
                    POS[s] = 0;
                }
            }
        }
    }
    // The shipped probe's Java path: slot table of 64-byte slots (owner,
    // position | depth << 32, capacity, segment address), then a bitmap of
    // the method ids it may record.
    static final long TABLE = U.allocateMemory(SLOTS * 64L + (1 << 17));
    static final long IDS = TABLE + ((long) SLOTS << 6);

    static void sEnter(int id) { slotPut(id, 1L << 32, 1, 4); }
    static void sExit(int id) { slotPut(id, 2L << 32, -1, 4); }
    static void s8Enter(int id) { slotPut(id, 1L << 32, 1, 3); }
    static void s8Exit(int id) { slotPut(id, 2L << 32, -1, 3); }

    static void slotPut(int id, long kind, int dd, int shift) {
        if (active != 0) {
            long t = Thread.currentThread().getId();
            long e = TABLE + ((t & MASK) << 6);
            if (U.getLong(e) == t) {
                long w = U.getLong(e + 8);
                if ((w >>> 32) == 0) return;
                if ((id >>> 20) != 0 || (U.getLong(IDS + ((id >>> 6) << 3)) & (1L << id)) == 0) { nEnter(id); return; }
                int p = (int) w;
                long b = U.getLong(e + 24);
                if (p >= (U.getInt(e + 16) << (4 - shift))) {
                    U.putLong(e + 8, w & 0xffffffff00000000L); // stand-in for "segment full: call the agent"
                    return;
                }
                long a = b + ((long) p << shift);
                if (shift == 4) {
                    U.putLong(a, 0L);
                    a += 8;
                }
                U.putLong(a, kind | id);
                U.putLong(e + 8, w + ((long) dd << 32) + 1);
                U.putIntRelease(null, b - 48, p + 1);
            } else if (INSIDE[(int) t & MASK] != 0) nEnter(id);
        }
    }
    // The tree candidate: slot as above (owner at +0; +8 the current node
    // in the low half, the depth in the high half; +16 the node table's
    // mask; +24 its address). Node k at NODES + 16 k: its key (parent << 32
    // | id) and its calls. A miss (a new context, or a collision) takes a
    // slow path; the agent would take it in native code.
    static final long TREE = U.allocateMemory(SLOTS * 64L);
    static final int TREE_NODES = 1 << 16;

    static int treeHash(int cur, int id) {
        return (cur * 0x9E3779B1 + id) * 0x85EBCA6B >>> 16;
    }

    static void tEnterTree(int id) {
        if (active != 0) {
            long t = Thread.currentThread().getId();
            long e = TREE + ((t & MASK) << 6);
            if (U.getLong(e) == t) {
                long w = U.getLong(e + 8);
                if ((w >>> 32) == 0) return;
                int cur = (int) w;
                int h = treeHash(cur, id) & U.getInt(e + 16);
                long n = U.getLong(e + 24) + ((long) h << 4);
                if (U.getLong(n) == (((long) cur << 32) | id)) {
                    U.putLong(n + 8, U.getLong(n + 8) + 1);
                    U.putLong(e + 8, ((w >>> 32) + 1) << 32 | h);
                } else {
                    treeMiss(e, w, cur, id);
                }
            } else if (INSIDE[(int) t & MASK] != 0) nEnter(id);
        }
    }

    static void tExitTree(int id) {
        if (active != 0) {
            long t = Thread.currentThread().getId();
            long e = TREE + ((t & MASK) << 6);
            if (U.getLong(e) == t) {
                long w = U.getLong(e + 8);
                if ((w >>> 32) <= 1) return;
                long key = U.getLong(U.getLong(e + 24) + ((long) (int) w << 4));
                if ((int) key == id) {
                    U.putLong(e + 8, ((w >>> 32) - 1) << 32 | (key >>> 32));
                } else {
                    nExit(id);
                }
            } else if (INSIDE[(int) t & MASK] != 0) nExit(id);
        }
    }

    /** A new context (or a collision): linear probing, then count it. */
    static void treeMiss(long e, long w, int cur, int id) {
        int mask = U.getInt(e + 16);
        long nodes = U.getLong(e + 24);
        long key = ((long) cur << 32) | id;
        int h = treeHash(cur, id) & mask;
        while (U.getLong(nodes + ((long) h << 4)) != key && U.getLong(nodes + ((long) h << 4)) != 0) {
            h = (h + 1) & mask;
        }
        long n = nodes + ((long) h << 4);
        U.putLong(n, key);
        U.putLong(n + 8, U.getLong(n + 8) + 1);
        U.putLong(e + 8, ((w >>> 32) + 1) << 32 | h);
    }

    static void jEnter(int id) {
        if (active != 0 && INSIDE[(int) Thread.currentThread().getId() & MASK] != 0) nEnter(id);
    }
    static void jExit(int id) {
        if (active != 0 && INSIDE[(int) Thread.currentThread().getId() & MASK] != 0) nExit(id);
    }
    static void tEnter(int id) {
        if (active != 0 && INSIDE[(int) Thread.currentThread().getId() & MASK] != 0) nEnterTsc(id);
    }
    static void tExit(int id) {
        if (active != 0 && INSIDE[(int) Thread.currentThread().getId() & MASK] != 0) nExitTsc(id);
    }

    static int x = 1;
    static int work(int i) { return (i * 31) ^ x; }   // the method being profiled (tiny)
    static int wBare(int i) { return work(i); }
    static int wU(int i) { uEnter(7); int r = work(i); uExit(7); return r; }
    static int wS(int i) { sEnter(7); int r = work(i); sExit(7); return r; }
    static int wS8(int i) { s8Enter(7); int r = work(i); s8Exit(7); return r; }
    static int wTree(int i) { tEnterTree(7); int r = work(i); tExitTree(7); return r; }
    static int wJ(int i) { jEnter(7); int r = work(i); jExit(7); return r; }
    static int wT(int i) { tEnter(7); int r = work(i); tExit(7); return r; }
    static int wN(int i) { long t0 = System.nanoTime(); int r = work(i); sink += System.nanoTime() - t0; return r; }

    interface Body { int run(int i); }

    static double time(Body b, int n) {
        int acc = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) acc += b.run(i);
        long t1 = System.nanoTime();
        sink += acc;
        return (t1 - t0) / (double) n;
    }

    public static void main(String[] a) {
        System.loadLibrary("pc");
        int s = (int) Thread.currentThread().getId() & MASK;
        BASE[s] = U.allocateMemory(64 + 16L * CAP);
        INSIDE[s] = 1;
        long t = Thread.currentThread().getId();
        long e = TABLE + ((long) s << 6);
        U.putLong(e, t);
        U.putInt(e + 16, CAP);
        U.putLong(e + 24, U.allocateMemory(64 + 16L * CAP) + 64);
        U.putLong(IDS, -1L);
        long te = TREE + ((long) s << 6);
        U.putLong(te, t);
        U.putLong(te + 8, 1L << 32); // depth 1 at node 0: inside a root context
        U.putInt(te + 16, TREE_NODES - 1);
        long nodes = U.allocateMemory(16L * TREE_NODES);
        U.setMemory(nodes, 16L * TREE_NODES, (byte) 0);
        U.putLong(te + 24, nodes);
        int n = 20_000_000;
        String[] names = {"bare", "unsafe", "slot", "slot8", "tree", "jni", "jni+rdtsc", "nanoTime"};
        Body[] bodies = {ProbeCandidates::wBare, ProbeCandidates::wU, ProbeCandidates::wS, ProbeCandidates::wS8,
            ProbeCandidates::wTree, ProbeCandidates::wJ, ProbeCandidates::wT, ProbeCandidates::wN};
        double[][] r = new double[bodies.length][7];
        for (int w = 0; w < 3; w++) for (Body b : bodies) { time(b, n); U.putLong(e + 8, 1L << 32); }
        for (int rep = 0; rep < 7; rep++)
            for (int k = 0; k < bodies.length; k++) { U.putLong(e + 8, 1L << 32); r[k][rep] = time(bodies[k], n); }
        // The tree counted every call of the rounds in one node, under the
        // root node 0.
        long counted = U.getLong(nodes + ((long) (treeHash(0, 7) & (TREE_NODES - 1)) << 4) + 8);
        if (counted != 10L * n || U.getLong(te + 8) != 1L << 32) {
            throw new AssertionError("tree candidate counted " + counted + " calls, not " + 10L * n);
        }
        for (int k = 0; k < bodies.length; k++) {
            java.util.Arrays.sort(r[k]);
            System.out.printf("%-10s %6.2f ns/call (median of 7; min %.2f)%n", names[k], r[k][3], r[k][0]);
        }
        // The nanoTime loop reads the clock twice a call: one read is half.
        double bare = r[0][3], nano = (r[bodies.length - 1][3] - bare) / 2;
        System.out.printf("buffers of %d MiB%n", CAP >> 16);
        for (int k = 1; k < bodies.length - 1; k++)
            System.out.printf("%-10s pair %5.2f ns = %.3f of one nanoTime() (%.2f ns)%n", names[k], r[k][3] - bare, (r[k][3] - bare) / nano, nano);
    }
}
