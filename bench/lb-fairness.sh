#!/usr/bin/env bash
# The lb group's ten-thousand-connection row by hand (issue 52): five
# `sluice serve static --size 1024` backends, one proxy with one worker
# doing round robin over them, and `sluice load -c CONNS` for a short
# window after a short warm-up (the bench's 2 s after 0.5 s), so that the
# pool is still growing when the window opens. It prints each system's
# rate, latency and answers per connection (min/median/max): the
# fairness that the rate alone hides. HAProxy runs the same row when it
# is installed (bash bench/install-peers.sh).
#
#   bench/lb-fairness.sh                          # 9,936 connections, 2 s after 0.5 s
#   CONNS=2000 DURATION=4s WARMUP=2s bench/lb-fairness.sh
#   SLUICE=/tmp/sluice-before bench/lb-fairness.sh  # an older build
#   EXTRA='    balance: least_request' bench/lb-fairness.sh   # another policy
#   H2=2 CONNS=2000 bench/lb-fairness.sh          # h2c clients, 2 streams each
#
# Needs: a release build, taskset; haproxy optional.
set -euo pipefail
CONNS=${CONNS:-9936}
DURATION=${DURATION:-2s}
WARMUP=${WARMUP:-500ms}
BASE_PORT=${BASE_PORT:-19100}
EXTRA=${EXTRA:-}
# H2=N: h2c clients (prior knowledge) with N streams in flight each.
H2=${H2:-}
LOAD_ARGS=()
BIND_ARGS=""
if [[ -n $H2 ]]; then LOAD_ARGS=(--h2 -m "$H2"); BIND_ARGS=" proto h2"; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/lb-fairness}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
proxy_bench_setup taskset
PROXY_PORT=$((BASE_PORT + 80))
BACKENDS=()
BACKEND_PIDS=()
for i in 0 1 2 3 4; do
  port=$((BASE_PORT + i))
  $OTHER_CPU "$SLUICE" serve static --listen "127.0.0.1:$port" --workers 1 --size 1024 \
    >"$WORK/backend-$i.log" 2>&1 &
  BACKEND_PIDS+=($!)
  BACKENDS+=("127.0.0.1:$port")
done
stop_backends() { kill "${BACKEND_PIDS[@]}" 2>/dev/null || true; }
trap 'stop_backends; proxy_bench_cleanup' EXIT
for i in 0 1 2 3 4; do wait_port $((BASE_PORT + i)); done

# load NAME: the row against the proxy on PROXY_PORT, its summary lines
# (after a second for the proxy to settle and the last row's sockets to
# close).
load() {
  sleep 1
  echo "== $1 ($CONNS ${H2:+h2c }connections${H2:+ of $H2 streams}, $DURATION after $WARMUP; load average $(load_average))"
  $OTHER_CPU "$SLUICE" load "${LOAD_ARGS[@]}" -c "$CONNS" -d "$DURATION" --warmup "$WARMUP" --timeout 10s \
    "http://127.0.0.1:$PROXY_PORT/" 2>&1 | tee "$OUT/$1.txt" |
    grep -E '^ +(50|90|99)%|Responses per connection|Requests/sec|Unanswered|Non-2xx|errors' || true
}

hosts=$(printf '"http://%s", ' "${BACKENDS[@]}")
cat >"$WORK/sluice.yaml" <<YAML
workers: 1
log: { level: warn }
limits: { max_connections: $((CONNS + 64)) }
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: [${hosts%, }]
    pool: { max_idle: 16384 }
    timeouts: { request: 30s }
$EXTRA
routes:
  - { path: /, upstream: backend }
YAML
$PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >"$WORK/sluice.log" 2>&1 &
PROXY_PID=$!
wait_port "$PROXY_PORT"
load sluice
stop_proxy

if command -v haproxy >/dev/null; then
  {
    printf 'global\n  nbthread 1\n  maxconn %s\n' $((CONNS + 16))
    printf '  tune.pool-low-fd-ratio 90\n  tune.pool-high-fd-ratio 95\n'
    printf 'defaults\n  mode http\n  option http-keep-alive\n  timeout connect 2s\n'
    printf '  timeout client 60s\n  timeout server 30s\n  timeout http-keep-alive 60s\n'
    printf '  http-reuse always\nfrontend front\n  bind 127.0.0.1:%s%s\n' "$PROXY_PORT" "$BIND_ARGS"
    printf '  default_backend back\nbackend back\n  balance roundrobin\n'
    for i in "${!BACKENDS[@]}"; do printf '  server b%s %s\n' "$i" "${BACKENDS[$i]}"; done
  } >"$WORK/haproxy.cfg"
  $PROXY_CPU haproxy -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
  PROXY_PID=$!
  wait_port "$PROXY_PORT"
  load haproxy
  stop_proxy
else
  echo "== haproxy: not installed (bash bench/install-peers.sh)"
fi
echo "Full reports in $OUT"
