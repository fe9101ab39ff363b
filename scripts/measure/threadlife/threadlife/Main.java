package threadlife;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Threads of the accuracy fixture's shape: each makes K twin calls, K root
 * calls and K twin calls, and prints every call's wall time, CPU time and
 * voluntary and involuntary context switches ({@code wall/cpu/vol/invol},
 * µs and counts). Commands on stdin: {@code go R K} (R threads, one after
 * the other; prints {@code done}), {@code exit}.
 */
public final class Main {
    private Main() {}

    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long[] switches() {
        long v = 0;
        long n = 0;
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/thread-self/status"))) {
                if (l.startsWith("voluntary_ctxt_switches:")) {
                    v = Long.parseLong(l.substring(24).trim());
                } else if (l.startsWith("nonvoluntary_ctxt_switches:")) {
                    n = Long.parseLong(l.substring(27).trim());
                }
            }
        } catch (IOException e) {
            // no counts: 0
        }
        return new long[] {v, n};
    }

    public static void main(String[] args) throws Exception {
        Never.never();
        for (int i = 0; i < 200; i++) {
            Root.root();
            Twin.root();
        }
        System.out.println("ready " + ProcessHandle.current().pid());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("exit")) {
                return;
            }
            int rounds = Integer.parseInt(w[1]);
            int k = Integer.parseInt(w[2]);
            for (int r = 0; r < rounds; r++) {
                long[][] t = new long[3 * k][4];
                Thread th = new Thread(() -> {
                    for (int i = 0; i < 3 * k; i++) {
                        long[] x0 = switches();
                        long c0 = MX.getCurrentThreadCpuTime();
                        long t0 = System.nanoTime();
                        if (i >= k && i < 2 * k) {
                            Root.root();
                        } else {
                            Twin.root();
                        }
                        long t1 = System.nanoTime();
                        long c1 = MX.getCurrentThreadCpuTime();
                        long[] x1 = switches();
                        t[i] = new long[] {t1 - t0, c1 - c0, x1[0] - x0[0], x1[1] - x0[1]};
                    }
                }, "measure-" + r);
                th.start();
                th.join();
                StringBuilder sb = new StringBuilder("round " + r + " wall/cpu/vol/invol");
                for (long[] c : t) {
                    sb.append(' ').append(c[0] / 1000).append('/').append(c[1] / 1000)
                            .append('/').append(c[2]).append('/').append(c[3]);
                }
                System.out.println(sb);
            }
            System.out.println("done");
        }
    }
}
