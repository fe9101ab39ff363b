/*
 * How much a probe pair costs by the way it records an event, measured in a
 * plain JVM with no agent (scripts/probe-candidates.sh builds and runs it):
 *   jni        a JNI native storing a 16-byte event with no clock read
 *   jni+rdtsc  the same with an rdtsc per event (exact timing's probe)
 *   unsafe     pure Java: the thread's slot found from its id, the event
 *              stored into native memory with Unsafe, the count published
 *              with a release store (a candidate for sampled timing)
 * around a tiny method, against the bare loop and System.nanoTime().
 */
import jdk.internal.misc.Unsafe;

public class ProbeCandidates {
    static final Unsafe U = Unsafe.getUnsafe();
    static final int SLOTS = 1 << 12, MASK = SLOTS - 1;
    static final long[] BASE = new long[SLOTS];   // native buffer address per slot
    static final int[] POS = new int[SLOTS];      // write index per slot (events)
    static final int CAP = 1 << 16;               // events per buffer (16 bytes each)
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
        int n = 20_000_000;
        String[] names = {"bare", "unsafe", "jni", "jni+rdtsc", "nanoTime"};
        Body[] bodies = {ProbeCandidates::wBare, ProbeCandidates::wU, ProbeCandidates::wJ, ProbeCandidates::wT, ProbeCandidates::wN};
        double[][] r = new double[bodies.length][7];
        for (int w = 0; w < 3; w++) for (Body b : bodies) time(b, n);
        for (int rep = 0; rep < 7; rep++)
            for (int k = 0; k < bodies.length; k++) r[k][rep] = time(bodies[k], n);
        for (int k = 0; k < bodies.length; k++) {
            java.util.Arrays.sort(r[k]);
            System.out.printf("%-10s %6.2f ns/call (median of 7; min %.2f)%n", names[k], r[k][3], r[k][0]);
        }
        // The nanoTime loop reads the clock twice a call: one read is half.
        double bare = r[0][3], nano = (r[4][3] - bare) / 2;
        for (int k = 1; k < 4; k++)
            System.out.printf("%-10s pair %5.2f ns = %.3f of one nanoTime() (%.2f ns)%n", names[k], r[k][3] - bare, (r[k][3] - bare) / nano, nano);
    }
}
