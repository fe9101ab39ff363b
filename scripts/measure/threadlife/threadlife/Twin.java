package threadlife;

/** {@link Root}'s twin: the same code, never profiled. */
public final class Twin {
    private Twin() {}

    static volatile long sink;

    public static void root() {
        spin(200_000L);
        spin(500_000L);
        spin(1_000_000L);
    }

    static void spin(long ns) {
        long end = System.nanoTime() + ns;
        long n = 0;
        while (System.nanoTime() < end) {
            n++;
        }
        sink = n;
    }
}
