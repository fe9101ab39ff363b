#!/usr/bin/env bash
# The figures of docs/sampled-timing.md, exact and sampled timing side by
# side in the same runs, for one sprig binary on one JDK:
#   1. the accuracy fixtures (a) and (b), charged/bare per timing mode;
#   2. the self-time overlap with JFR's execution samples on javac
#      (Gen::genClass), H2 (the statement) and Jetty (Server::handle);
#   3. the settled overhead of the partial roots in both modes, and the
#      idle rows (a root never called: under sampled timing position
#      sampling alone), with each sampled tree checked path by path against the
#      exact one (javac's Gen::genClass among them).
#
# usage: bash scripts/measure/sampled-figures.sh SPRIG [JDK_HOME] [OUT_DIR]
#   environment: SPRIG_FIGURES_STEPS (default accuracy,jfr,overhead),
#   SPRIG_FIGURES_REPEATS (workload repeats, default 2),
#   SPRIG_FIGURES_SETTLE (iterations before the settled window, default 20)
#   SPRIG     a release sprig binary (libsprig_agent.so beside it)
#   JDK_HOME  default /usr/lib/jvm/java-17-openjdk-amd64
#   OUT_DIR   default sampled-figures-<jdk version>; gets one .txt and one
#             .json per step
set -euo pipefail
sprig=${1:?usage: scripts/measure/sampled-figures.sh SPRIG [JDK_HOME] [OUT_DIR]}
jdk=${2:-/usr/lib/jvm/java-17-openjdk-amd64}
version=$(sed -n 's/^JAVA_VERSION="\(.*\)"/\1/p' "$jdk/release")
out=${3:-sampled-figures-$version}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
cargo build --release -q -p sprig-bench
bench=(target/release/sprig-bench --no-setup --sprig "$sprig" --jdk "$jdk")
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    bench[0]=$CARGO_TARGET_DIR/release/sprig-bench
fi
step() {
    local name=$1
    shift
    echo "== $name: ${bench[*]} $*" | tee "$out/$name.txt"
    "${bench[@]}" "$@" --json "$out/$name.json" 2>"$out/$name.log" | tee -a "$out/$name.txt"
}
repeats=${SPRIG_FIGURES_REPEATS:-2}
settle=${SPRIG_FIGURES_SETTLE:-20}
case "${SPRIG_FIGURES_STEPS:-accuracy,jfr,overhead}" in *accuracy*)
    step accuracy --quick --only accuracy ;;
esac
case "${SPRIG_FIGURES_STEPS:-accuracy,jfr,overhead}" in *jfr*)
    step jfr --quick --only jfr ;;
esac
case "${SPRIG_FIGURES_STEPS:-accuracy,jfr,overhead}" in *overhead*)
    # Two runs: `partial` names javac's Gen::genClass and H2's Delete::update.
    step overhead-javac --quick --repeats "$repeats" --only javac \
        --rows partial,idle --schemes lazy --timing-modes exact,sampled --settle "$settle"
    step overhead-h2-jetty --quick --repeats "$repeats" --only h2,jetty \
        --rows statement,server,servlet,idle --schemes lazy \
        --timing-modes exact,sampled --settle "$settle" ;;
esac
