#!/usr/bin/env bash
# Installs what sprig's build, tests and demo need on a Debian machine of this
# kind, and nothing that is already there. Idempotent; safe to run often.
#   JDK 17 (javac, jcmd) from Debian's packages: the baseline the tests need.
#   A JDK 25 is used too when one is installed under /usr/lib/jvm (not required).
set -euo pipefail

need_apt=()
if [ ! -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ]; then
    need_apt+=(openjdk-17-jdk-headless)
fi
for tool in setpriv:util-linux; do
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
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found: sprig needs a Rust toolchain (1.95 or newer) on PATH" >&2
    exit 1
fi
echo "setup: ok (JDKs: $(ls -d /usr/lib/jvm/*/bin/javac 2>/dev/null | sed 's#/bin/javac##; s#/usr/lib/jvm/##' | tr '\n' ' '))" >&2
