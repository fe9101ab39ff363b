#!/usr/bin/env bash
# scripts/measure/attach-loaders.sh on real Groovy: a program that compiles the
# same Groovy script (one class and 23 closure classes, the same names each
# time) with a new GroovyShell per unit of work, runs it through
# `GroovyUnits::unit` and keeps the last KEEP scripts (and so their class
# loaders) alive. Needs Groovy's jar (GROOVY_JAR, default the Debian
# package's /usr/share/java/groovy-all.jar).
#   bash scripts/measure/attach-groovy.sh [sprig] [KEEP] [SESSIONS] [SECS] [PAUSE]
set -euo pipefail
cd "$(dirname "$0")/../.."
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
jar=${GROOVY_JAR:-/usr/share/java/groovy-all.jar}
[ -f "$jar" ] || { echo "no Groovy jar at $jar (set GROOVY_JAR)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=""
for i in $(seq 0 22); do
    steps="$steps + \"x = [x, $i].inject(0L) { a, b -> a * 31 + b }\\n\""
done
cat > "$work/GroovyUnits.java" <<EOF
import groovy.lang.GroovyShell;
import groovy.lang.Script;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;

public final class GroovyUnits {
    static final String TEXT = "long x = seed\\n" $steps + "return x\\n";
    static final ArrayDeque<Script> LIVE = new ArrayDeque<>();
    static int keep;

    public static synchronized long unit(int seed) {
        Script s = new GroovyShell().parse(TEXT, "Unit.groovy");
        s.setProperty("seed", (long) seed);
        long r = ((Number) s.run()).longValue();
        LIVE.addLast(s);
        while (LIVE.size() > keep) {
            LIVE.removeFirst();
        }
        return r;
    }

    public static void main(String[] args) throws Exception {
        keep = Integer.parseInt(args[0]);
        long sum = 0;
        for (int i = 0; i < keep; i++) {
            sum += unit(i);
        }
        System.out.println("ready " + ProcessHandle.current().pid() + " " + sum);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.trim().split(" ");
            if (p[0].equals("loop")) {
                long pause = Long.parseLong(p[1]);
                Thread t = new Thread(() -> {
                    try {
                        for (int i = 0; ; i++) {
                            unit(i);
                            Thread.sleep(pause);
                        }
                    } catch (Exception e) {
                        e.printStackTrace();
                    }
                });
                t.setDaemon(true);
                t.start();
                System.out.println("looping");
            } else if (p[0].equals("exit")) {
                System.exit(0);
            }
        }
    }
}
EOF
"$jdk/bin/javac" -cp "$jar" -d "$work" "$work/GroovyUnits.java"
UNITS_CP="$jar:$work" UNITS_MAIN=GroovyUnits UNITS_ROOT='GroovyUnits::unit' \
    bash scripts/measure/attach-loaders.sh "$@"
