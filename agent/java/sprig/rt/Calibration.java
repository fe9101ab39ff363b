package sprig.rt;

/**
 * Probe calibration, run by the sprig agent on its own thread at the start
 * and the end of a session, and in short bursts by the profiled threads as
 * they enter a root ({@code Probe.burst}). The agent instruments this class
 * exactly as it instruments profiled code before defining it ({@code loop}
 * gets the root probes, {@code empty} the plain ones, {@code burst} none),
 * so the probes measured here take the same path as the probes in the
 * user's methods, compiled by the same JIT.
 */
public final class Calibration {
    private Calibration() {}

    /** One batch of the agent's calibration: a root context around {@code burst(n)}. */
    public static void loop(int n) {
        burst(n);
    }

    /**
     * {@code n} calls of an empty instrumented method. The agent's batches
     * compile it; a profiled thread's burst calls it inside the root
     * context it just opened, and the CCT builder reads the calls' probe
     * events as a calibration.
     */
    static void burst(int n) {
        for (int i = 0; i < n; i++) {
            empty();
        }
        if (n < 0) {
            // Never runs. It makes the method longer than HotSpot's
            // FreqInlineSize (325 bytes), so that no caller inlines it, not
            // even the hot loop above: the agent's batches then compile
            // this method on its own, and a thread's burst, called from
            // the probe class, runs that same compiled code instead of an
            // interpreted or profiling copy (whose probes cost 10-20 ns
            // more a call).
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
            empty();
        }
    }

    static void empty() {}
}
