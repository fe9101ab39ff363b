import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;

/*
 * What a Method.invoke costs inside a profiled root, against a direct call
 * of the same method (scripts/measure/reflect-cost.sh drives it and sprig). Each
 * "time" command runs root() rounds times; root() makes N direct calls of
 * target() and N calls of it through Method.invoke, and prints the ns per
 * call of each loop, medians over the rounds.
 */
public final class ReflectCost {
    static final int N = 200_000;
    static long sink;

    static int target(int i) {
        return i * 31 + 7;
    }

    static final Method TARGET;

    static {
        try {
            TARGET = ReflectCost.class.getDeclaredMethod("target", int.class);
        } catch (NoSuchMethodException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The root: both loops, their times in ns per call. */
    public static long[] root(int n) throws Exception {
        long t0 = System.nanoTime();
        long acc = 0;
        for (int i = 0; i < n; i++) {
            acc += target(i);
        }
        long t1 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            acc += (Integer) TARGET.invoke(null, i);
        }
        long t2 = System.nanoTime();
        sink += acc;
        return new long[] {t1 - t0, t2 - t1};
    }

    public static void main(String[] args) throws Exception {
        System.out.println("ready " + ProcessHandle.current().pid());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("time")) {
                int rounds = Integer.parseInt(w[1]);
                double[] direct = new double[rounds];
                double[] reflect = new double[rounds];
                for (int r = 0; r < rounds; r++) {
                    long[] t = root(N);
                    direct[r] = t[0] / (double) N;
                    reflect[r] = t[1] / (double) N;
                }
                java.util.Arrays.sort(direct);
                java.util.Arrays.sort(reflect);
                System.out.printf("direct %.2f invoke %.2f%n", direct[rounds / 2], reflect[rounds / 2]);
            } else if (w[0].equals("exit")) {
                return;
            }
        }
    }
}
