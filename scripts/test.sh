#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run calls this, nothing weaker).
# Installs what is missing, checks formatting and lints, builds the sprig
# binary and the agent, then runs every test (unit, property, and end-to-end
# tests that start real JVMs on JDK 17 and, where installed, JDK 25).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# One line per step, with the time so far: the build steps print little.
step() { echo "test.sh: [$1/5] $2 ($((SECONDS - started)) s so far)" >&2; }
step 1 "setup: the JDKs and tools the tests need"
bash scripts/setup.sh
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
step 2 "cargo fmt --check"
cargo fmt --all -- --check
step 3 "cargo clippy (every target; a first build takes several minutes)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step 4 "cargo build (the sprig binary, the agent, the bench)"
cargo build --workspace --quiet
step 5 "cargo test: every test binary in turn; the end-to-end ones start real JVMs"
cargo test --workspace --no-fail-fast -- --test-threads=2
echo "test.sh: done in $((SECONDS - started)) s" >&2
