#!/usr/bin/env bash
# Checks the seeds' backends in bench/runtimes against `sluice serve`, byte
# for byte: builds each on first use (into ~/.cache/sluice/runtimes), starts
# it on a free loopback port next to sluice's own backends and compares
# status, content type, Location and body for every endpoint they share,
# printing one line per request. A runtime whose toolchain is missing is
# skipped with a line saying so.
#
#   bench/runtimes/check.sh                    # all six
#   bench/runtimes/check.sh go-http payara     # the ones named
#
# It runs crates/bench/tests/runtimes.rs (one check, two ways to start it).
# Needs: cargo; java 17+ and mvn for the JVM backends, go, node.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Each runtime's test is named after it (go_http_answers_as_sluice_serve,
# …); three are #[ignore]d in `cargo test`, hence --include-ignored. A name
# that matches no runtime is refused here rather than running nothing.
filters=()
for name in "$@"; do
    case $name in
        go-http|node|spring-mvc|webflux|grizzly|payara) filters+=("${name//-/_}_answers") ;;
        *) echo "unknown runtime '$name' (go-http, node, spring-mvc, webflux, grizzly, payara)" >&2; exit 2 ;;
    esac
done
exec cargo test -p bench --test runtimes -- --include-ignored --nocapture --test-threads=1 "${filters[@]}"
