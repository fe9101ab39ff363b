#!/usr/bin/env bash
# Installs what is missing, builds sprig, starts the bundled sample app
# (fixtures/demo: an order service on two worker threads), profiles its
# request handler for a few seconds and prints the calling context tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
cargo build --release --quiet -p sprig -p sprig-agent
classes=$(mktemp -d)
trap 'kill ${keeper:-} ${app:-} 2>/dev/null || true; rm -rf "$classes"' EXIT
"$JAVA_HOME/bin/javac" -d "$classes" fixtures/demo/com/acme/shop/*.java
# The app runs until its stdin closes; a sleep keeps it open, and is killed
# on the way out (with no output of its own, so a pipe from this script,
# `demo.sh | tee bug.txt`, ends when the script does).
sleep 600 2>/dev/null | "$JAVA_HOME/bin/java" -cp "$classes" com.acme.shop.Shop > "$classes/app.out" 2>&1 &
keeper=$(jobs -p | tail -n1)
for _ in $(seq 100); do grep -q '^ready' "$classes/app.out" 2>/dev/null && break; sleep 0.1; done
app=$(awk '/^ready/ {print $2}' "$classes/app.out")
echo "demo: sample app running as pid $app; profiling com.acme.shop.Service::handle for 3 s" >&2
./target/release/sprig profile "$app" --root 'com.acme.shop.Service::handle' --duration 3
