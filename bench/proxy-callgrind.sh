#!/usr/bin/env bash
# Instructions per proxied request, counted by callgrind: a measure of the
# proxy's CPU cost that the other sessions on a shared machine cannot
# disturb (wall-clock benches there are noisy). The release proxy runs
# under `valgrind --tool=callgrind` with one worker in front of an
# nginx-light backend; `sluice load -n` sends a fixed number of requests
# on 4 keep-alive connections, twice (N1 then N2 requests, a fresh proxy
# each time), and the cost per request is (Ir(N2) - Ir(N1)) / (N2 - N1),
# so start-up and shutdown cancel out.
#
#   bench/proxy-callgrind.sh                       # /v1/pets, 2000 and 12000
#   SLUICE=/tmp/sluice-before bench/proxy-callgrind.sh
#   REQUEST_PATH='/v1//pets/./x/../' bench/proxy-callgrind.sh  # the rewrite path
#   PIPELINE=16 N1=4000 N2=24000 bench/proxy-callgrind.sh      # pipelined 16 deep
#   EXTRA_CONFIG='traces: { otlp: { endpoint: "http://127.0.0.1:4317" }, sampler: { parent_based_ratio: 0.01 } }' \
#     bench/proxy-callgrind.sh                     # with tracing (docs/OBSERVABILITY.md)
#   ROUTE_CHAIN='[limit]' EXTRA_CONFIG='middleware: { limit: { rate_limit: { ... } } }' \
#     bench/proxy-callgrind.sh                     # the route through handlers
#   KEEP=/tmp/cg bench/proxy-callgrind.sh          # keeps callgrind.N2 there, for
#     callgrind_annotate --inclusive=yes /tmp/cg/callgrind.12000 (per function)
#
# Needs: valgrind, nginx (apt-get install -y valgrind nginx-light), a
# release build. LOADER (default: SLUICE) sends the requests.
set -euo pipefail

N1=${N1:-2000}
N2=${N2:-12000}
BACKEND_PORT=${BACKEND_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
REQUEST_PATH=${REQUEST_PATH:-/v1/pets}
PIPELINE=${PIPELINE:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/proxy-callgrind}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
LOADER=${LOADER:-$SLUICE}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup valgrind nginx
start_pets_backend

cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
routes:
  - { path: /, upstream: backend${ROUTE_CHAIN:+, chain: $ROUTE_CHAIN} }
log: { level: warn }
${EXTRA_CONFIG:-}
YAML

# instructions N: total instructions the proxy ran to serve N requests.
instructions() {
  local out="$WORK/callgrind.$1"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$SLUICE" proxy -c "$WORK/sluice.yaml" \
    >/dev/null 2>"$WORK/valgrind.log" &
  PROXY_PID=$!
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT") 2>/dev/null && break; sleep 0.1; done
  "$LOADER" load -q -c4 --pipeline "$PIPELINE" -n "$1" --timeout 30s "http://127.0.0.1:$PROXY_PORT$REQUEST_PATH" >"$WORK/load.$1" 2>&1
  kill -TERM "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; PROXY_PID=""
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

i1=$(instructions "$N1")
i2=$(instructions "$N2")
per=$(( (i2 - i1) / (N2 - N1) ))
if [[ -n ${KEEP:-} ]]; then
  mkdir -p "$KEEP" && cp "$WORK/callgrind.$N1" "$WORK/callgrind.$N2" "$KEEP/"
fi
mkdir -p "$OUT"
line="$(basename "$SLUICE") $REQUEST_PATH: $i1 Ir for $N1 requests, $i2 Ir for $N2: $per instructions per request"
echo "$line" | tee -a "$OUT/results.txt"
