import jdk.internal.misc.Unsafe;
/*
 * What the release store of a segment's count costs the probes in a loop
 * like bench.ProbeCost's (a static field added to between the two
 * probes), in a plain JVM: the shipped Java path's checks and stores
 * ("release"), the same with a plain store of the count ("plain", not safe:
 * C2 may move the event's stores after it), and one 8-byte word per event
 * carrying a generation instead of any count ("gen", a protocol sprig does
 * not have). Prints ns per call of each loop, the median of 9 rounds of 10
 * million calls, and one System.nanoTime(). scripts/measure/probe-candidates.sh
 * runs it after ProbeCandidates.
 */
public class ReleaseCost {
    static final Unsafe U = Unsafe.getUnsafe();
    static final int SLOTS = 1 << 12, MASK = SLOTS - 1;
    static final int CAP = 1 << 16;
    static int active = 1;
    static final int[] INSIDE = new int[SLOTS];
    static final long TABLE = U.allocateMemory(SLOTS * 64L + (1 << 17));
    static final long IDS = TABLE + ((long) SLOTS << 6);
    static long acc;
    static void slotPut(int id, long kind, int dd, boolean release) {
        if (active != 0) {
            long t = Thread.currentThread().getId();
            long e = TABLE + ((t & MASK) << 6);
            if (U.getLong(e) == t) {
                long w = U.getLong(e + 8);
                if ((w >>> 32) == 0) return;
                if ((id >>> 20) != 0 || (U.getLong(IDS + ((id >>> 6) << 3)) & (1L << id)) == 0) { return; }
                int p = (int) w;
                long b = U.getLong(e + 24);
                if (p >= U.getInt(e + 16)) { U.putLong(e + 8, w & 0xffffffff00000000L); return; }
                long a = b + ((long) p << 4);
                U.putLong(a, 0L);
                U.putLong(a + 8, kind | id);
                U.putLong(e + 8, w + ((long) dd << 32) + 1);
                if (release) U.putIntRelease(null, b - 48, p + 1); else U.putInt(null, b - 48, p + 1);
            }
        }
    }
    // One 8-byte word per event (kind | generation | id), nothing else
    // published: readers find the end of a segment by the generation.
    static void genPut(int id, long kind, int dd) {
        if (active != 0) {
            long t = Thread.currentThread().getId();
            long e = TABLE + ((t & MASK) << 6);
            if (U.getLong(e) == t) {
                long w = U.getLong(e + 8);
                if ((w >>> 32) == 0) return;
                if ((id >>> 20) != 0 || (U.getLong(IDS + ((id >>> 6) << 3)) & (1L << id)) == 0) { return; }
                int p = (int) w;
                long b = U.getLong(e + 24);
                if (p >= U.getInt(e + 16)) { U.putLong(e + 8, w & 0xffffffff00000000L); return; }
                U.putLong(b + ((long) p << 3), kind | U.getLong(e + 32) | id);
                U.putLong(e + 8, w + ((long) dd << 32) + 1);
            }
        }
    }
    static void tGen(int x) { genPut(7, 1L << 48, 1); acc += x; genPut(7, 2L << 48, -1); }
    static long loopGen(int n) { long t0 = System.nanoTime(); for (int i = 0; i < n; i++) tGen(i); return System.nanoTime() - t0; }
    static void target(int x) { acc += x; }
    static void tRel(int x) { slotPut(7, 1L << 32, 1, true); acc += x; slotPut(7, 2L << 32, -1, true); }
    static void tPlain(int x) { slotPut(7, 1L << 32, 1, false); acc += x; slotPut(7, 2L << 32, -1, false); }
    static long loopBare(int n) { long t0 = System.nanoTime(); for (int i = 0; i < n; i++) target(i); return System.nanoTime() - t0; }
    static long loopRel(int n) { long t0 = System.nanoTime(); for (int i = 0; i < n; i++) tRel(i); return System.nanoTime() - t0; }
    static long loopPlain(int n) { long t0 = System.nanoTime(); for (int i = 0; i < n; i++) tPlain(i); return System.nanoTime() - t0; }
    static long loopNano(int n) { long s = 0; long t0 = System.nanoTime(); for (int i = 0; i < n; i++) s += System.nanoTime(); long t = System.nanoTime() - t0; acc += s; return t; }
    public static void main(String[] a) {
        long t = Thread.currentThread().getId();
        long e = TABLE + ((t & MASK) << 6);
        U.putLong(e, t); U.putInt(e + 16, CAP);
        U.putLong(e + 24, U.allocateMemory(64 + 16L * CAP) + 64);
        U.putLong(IDS, -1L);
        int n = 10_000_000;
        double[][] r = new double[5][9];
        for (int rep = 0; rep < 12; rep++) {
            U.putLong(e + 8, 1L << 32);
            double b = loopBare(n) / (double) n, x = loopRel(n) / (double) n;
            U.putLong(e + 8, 1L << 32);
            double y = loopPlain(n) / (double) n, z = loopNano(n) / (double) n;
            U.putLong(e + 8, 1L << 32);
            double g = loopGen(n) / (double) n;
            if (rep >= 3) { r[0][rep-3] = b; r[1][rep-3] = x; r[2][rep-3] = y; r[3][rep-3] = z; r[4][rep-3] = g; }
        }
        for (double[] v : r) java.util.Arrays.sort(v);
        System.out.printf("bare %.2f  release %.2f (pair %.2f)  plain %.2f (pair %.2f)  gen %.2f (pair %.2f)  nanoTime %.2f%n",
            r[0][4], r[1][4], r[1][4]-r[0][4], r[2][4], r[2][4]-r[0][4], r[4][4], r[4][4]-r[0][4], r[3][4]);
    }
}
