package sprig.rt;

/**
 * Probe calibration, run by the sprig agent on its own thread at the start
 * of a session. The agent instruments this class exactly as it instruments
 * profiled code before defining it ({@code loop} gets the root probes,
 * {@code empty} the plain ones), so the probes measured here take the same
 * path as the probes in the user's methods, compiled by the same JIT.
 */
public final class Calibration {
    private Calibration() {}

    /** One batch: {@code n} calls of an empty instrumented method. */
    public static void loop(int n) {
        for (int i = 0; i < n; i++) {
            empty();
        }
    }

    static void empty() {}
}
