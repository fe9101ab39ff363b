package threadlife;

/** The root the sessions profile: spins 200 µs, 500 µs and 1 ms on the clock. */
public final class Root {
    private Root() {}

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
