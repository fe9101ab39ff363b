package bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Probe cost benchmark, run under the sprig agent with roots
 * bench.Bench::root and bench.Bench::empty. "bench N R" measures, R rounds
 * of N calls each, keeping the fastest round:
 * <ul>
 * <li>inside the root context: an instrumented empty method (probe pair),
 * the same method uninstrumented, and System.nanoTime();</li>
 * <li>outside any root context: the plain probe pair exactly as the
 * rewriter injects it (Probe.enter/Probe.exit), and the empty loop.</li>
 * </ul>
 * Prints "result NAME NS_PER_CALL" lines, then "done".
 */
public class Bench {
    static long acc;

    /** Instrumented (a root pattern matches it; nested inside root it is a plain entry/exit pair). */
    public static void empty(int x) {
        acc += x;
    }

    /** The same body, never instrumented. */
    static void plain(int x) {
        acc += x;
    }

    static long loopInstrumented(int n) {
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            empty(i);
        }
        return System.nanoTime() - t0;
    }

    static long loopPlain(int n) {
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            plain(i);
        }
        return System.nanoTime() - t0;
    }

    static long loopNanoTime(int n) {
        long s = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            s += System.nanoTime();
        }
        long t = System.nanoTime() - t0;
        acc += s;
        return t;
    }

    static long loopProbePair(int n) {
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            sprig.rt.Probe.enter(7);
            plain(i);
            sprig.rt.Probe.exit(7);
        }
        return System.nanoTime() - t0;
    }

    static void report(String name, long bestNs, int n) {
        System.out.println("result " + name + " " + ((double) bestNs / n));
    }

    /** The root: everything measured in here runs inside the root context. */
    public static void root(int n, int rounds) {
        long instr = Long.MAX_VALUE, plain = Long.MAX_VALUE, nano = Long.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            instr = Math.min(instr, loopInstrumented(n));
            plain = Math.min(plain, loopPlain(n));
            nano = Math.min(nano, loopNanoTime(n));
        }
        report("root_pair", instr, n);
        report("root_plain", plain, n);
        report("root_nanotime", nano, n);
    }

    static void outside(int n, int rounds) {
        long pair = Long.MAX_VALUE, plain = Long.MAX_VALUE, nano = Long.MAX_VALUE;
        long rootCall = Long.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            // `empty` is a root: each call opens and closes a root context.
            rootCall = Math.min(rootCall, loopInstrumented(n));
        }
        report("outside_root_call", rootCall, n);
        for (int r = 0; r < rounds; r++) {
            pair = Math.min(pair, loopProbePair(n));
            plain = Math.min(plain, loopPlain(n));
            nano = Math.min(nano, loopNanoTime(n));
        }
        report("outside_pair", pair, n);
        report("outside_plain", plain, n);
        report("outside_nanotime", nano, n);
    }

    /** A small unit of work, the root of the throughput runs. */
    public static int work(int x) {
        int h = x;
        for (int k = 0; k < 8; k++) {
            h = h * 31 + k;
        }
        return h;
    }

    /** Prints "tput W CALLS" for each of `windows` windows of `ms` milliseconds. */
    static void tput(int windows, int ms) {
        for (int w = 0; w < windows; w++) {
            long end = System.nanoTime() + ms * 1000000L;
            long calls = 0;
            while (System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) {
                    acc += work(i);
                }
                calls += 1000;
            }
            System.out.println("tput " + w + " " + calls);
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w[0].equals("bench")) {
                int n = Integer.parseInt(w[1]);
                int rounds = Integer.parseInt(w[2]);
                root(n, rounds);
                outside(n, rounds);
                System.out.println("done");
            } else if (w[0].equals("tput")) {
                tput(Integer.parseInt(w[1]), Integer.parseInt(w[2]));
                System.out.println("done");
            } else if (w[0].equals("quit")) {
                return;
            }
        }
    }
}
