# Helpers for the scripts that drive one of the bench's workloads
# (fixtures/bench, `bench.Driver`) by hand. Sourced, not run.
#
# bench_start JDK NAME WORKLOAD [ARGS...] compiles the fixtures into
# $work (a private temporary directory the caller made), starts the
# workload's JVM with $BENCH_JAVA_OPTS, sets $jvm to its pid and opens
# fd 3 on its commands; bench_window N runs N iterations and prints their
# median in ms; bench_plateau N runs N windows and prints the median of
# the last five (the plateau); bench_stop asks the JVM to quit and waits
# for it (up to 10 s; the caller's cleanup kills it after that);
# sprig_detach stops the sprig session $sp and waits for it. NAME
# prefixes the error messages. For the javac workload, javac_workload
# makes $work with its sources and the cleanup, and profile_javac attaches
# sprig with `Gen::genClass` as the root.

# The Jetty jars the fixtures compile against (Debian's libjetty9-java).
bench_jars() {
    local j=/usr/share/java
    echo "$j/jetty9-server.jar:$j/jetty9-servlet.jar:$j/jetty9-security.jar:$j/jetty9-http.jar:$j/jetty9-io.jar:$j/jetty9-util.jar:$j/servlet-api.jar"
}

bench_start() {
    local jdk=$1
    bench_name=$2
    shift 2
    local jars
    jars=$(bench_jars)
    # shellcheck disable=SC2046
    "$jdk/bin/javac" -d "$work/stubs" $(find fixtures/bench/stubs -name '*.java')
    # shellcheck disable=SC2046
    "$jdk/bin/javac" -nowarn -d "$work/classes" -cp "$work/stubs:$jars" $(find fixtures/bench/src -name '*.java')
    mkfifo "$work/in"
    # shellcheck disable=SC2086
    "$jdk/bin/java" ${BENCH_JAVA_OPTS:-} -cp "$work/classes:$jars" bench.Driver "$@" \
        < "$work/in" > "$work/out" 2>&1 &
    jvm=$!
    exec 3> "$work/in"
}

bench_window() {
    local n0
    n0=$(grep -c '^times' "$work/out" || true)
    echo "iter $1" >&3
    while [ "$(grep -c '^times' "$work/out" || true)" -le "$n0" ]; do
        kill -0 "$jvm" || { echo "$bench_name: the JVM died" >&2; exit 1; }
        sleep 0.3
    done
    grep '^times' "$work/out" | tail -1 | tr ' ' '\n' | sed 1d | sort -n |
        awk '{a[NR]=$1} END{printf "%.2f", a[int((NR+1)/2)]/1e6}'
}

# bench_plateau N: runs N windows of 20 iterations and prints the median
# of the last five windows' medians (of all, when fewer), in ms; fails
# when a window does. On the javac workload (JDK 17, this machine kind)
# the windows still fall until about the 20th, bare (60 ms after 12
# windows, 52 ms from the 25th on) and profiled alike: the javac scripts
# take 30. With SHOW_WINDOWS=1 in the environment each window's median
# also goes to stderr, on one line.
bench_plateau() {
    local all="" w
    for _ in $(seq "$1"); do
        w=$(bench_window 20) || return 1
        all="$all $w"
    done
    [ "${SHOW_WINDOWS:-0}" != 1 ] || echo "windows:$all" >&2
    echo "$all" | tr ' ' '\n' | sed '/^$/d' | tail -5 | sort -n |
        awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'
}

# sprig_detach: stops the sprig session $sp started (Ctrl-C: it restores
# the JVM and writes its report) and waits for it.
sprig_detach() {
    kill -INT "$sp"
    wait "$sp" || true
    sp=
}

bench_stop() {
    echo quit >&3
    for _ in $(seq 50); do
        kill -0 "$jvm" 2> /dev/null || return 0
        sleep 0.2
    done
}

# javac_workload NAME: for the scripts that drive the javac workload.
# Sets $jdk (JAVA_HOME_17 or the distribution's JDK 17), makes $work
# (bench_workdir) and unpacks the sources javac compiles there (the JDK 17
# sources that `sprig-bench` fetches: SPRIG_BENCH_SRC_ZIP, or
# ~/.cache/sprig-bench/jdk17-src.zip).
javac_workload() {
    jdk=${JAVA_HOME_17:-/usr/lib/jvm/java-17-openjdk-amd64}
    local zip=${SPRIG_BENCH_SRC_ZIP:-$HOME/.cache/sprig-bench/jdk17-src.zip}
    [ -f "$zip" ] || { echo "$1: no JDK 17 sources at $zip (run sprig-bench --only javac once)" >&2; exit 1; }
    bench_workdir
    (cd "$work" && unzip -q "$zip" 'java.base/java/util/concurrent/atomic/*')
}

# bench_workdir: makes $work (private, mktemp -d), clears $jvm and $sp,
# and sets bench_cleanup to run at exit.
bench_workdir() {
    work=$(mktemp -d)
    jvm=
    sp=
    trap bench_cleanup EXIT
}

# At exit: stops the sprig process ($sp) and the JVM ($jvm) if still
# running, and removes $work.
bench_cleanup() {
    if [ -n "${sp:-}" ]; then kill -INT "$sp" 2> /dev/null || true; fi
    if [ -n "${jvm:-}" ]; then kill "$jvm" 2> /dev/null || true; fi
    rm -rf "$work"
}

# profile_javac SPRIG OUT [ARGS...]: attaches SPRIG to $jvm with javac's
# `Gen::genClass` as the root (JSON report in OUT/report.json, stderr in
# OUT/sprig.err), sets $sp and returns once the session is profiling.
profile_javac() {
    local sprig=$1 out=$2
    shift 2
    "$sprig" profile "$jvm" --root 'com.sun.tools.javac.jvm.Gen::genClass' --include 'com.sun.tools.javac.**' \
        --duration 900 --format json -o "$out/report.json" "$@" 2> "$out/sprig.err" &
    sp=$!
    bench_wait_profiling "$out/sprig.err"
}

# bench_wait_profiling ERR: returns once the sprig process $sp, its stderr
# in ERR, says it is profiling; exits with that stderr if it ended first.
bench_wait_profiling() {
    until grep -q '^sprig: profiling' "$1"; do
        kill -0 "$sp" 2> /dev/null || { cat "$1" >&2; exit 1; }
        sleep 0.2
    done
}
