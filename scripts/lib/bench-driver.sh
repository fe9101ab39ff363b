# Helpers for the scripts that drive one of the bench's workloads
# (fixtures/bench, `bench.Driver`) by hand. Sourced, not run.
#
# bench_start JDK NAME WORKLOAD [ARGS...] compiles the fixtures into
# $work (a private temporary directory the caller made), starts the
# workload's JVM with $BENCH_JAVA_OPTS, sets $jvm to its pid and opens
# fd 3 on its commands; bench_window N runs N iterations and prints their
# median in ms; bench_stop asks the JVM to quit and waits for it (up to
# 10 s; the caller's cleanup kills it after that). NAME prefixes the error
# messages.

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

bench_stop() {
    echo quit >&3
    for _ in $(seq 50); do
        kill -0 "$jvm" 2> /dev/null || return 0
        sleep 0.2
    done
}
