#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run calls this, nothing weaker).
# Installs what is missing, checks formatting and lints, builds the sprig
# binary and the agent, then runs every test (unit, property, and end-to-end
# tests that start real JVMs on JDK 17 and, where installed, JDK 25).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --quiet
cargo test --workspace --no-fail-fast -- --test-threads=2
