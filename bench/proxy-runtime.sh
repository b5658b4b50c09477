#!/usr/bin/env bash
# sluice proxy: a current-thread runtime per core (SO_REUSEPORT listeners,
# `runtime: per_core`) against one work-stealing runtime
# (`runtime: multi_thread`), both with `workers: 2`, in the same run.
#
# An nginx-light backend (one worker) answers GET /v1/pets. Nothing is
# pinned: load generator, proxy and backend share every CPU, as they do
# on a 2-core sidecar host. Each mode is loaded with `wrk -t1` at many
# connections (128, where the kernel spreads them evenly) and at few (4,
# where SO_REUSEPORT's hashing may leave one worker idle); rounds
# alternate the modes; medians are printed with the proxy's CPU per request.
#
#   bench/proxy-runtime.sh                      # 3 rounds of 10 s per cell
#   DURATION=5s ROUNDS=1 bench/proxy-runtime.sh
#
# Needs: wrk, nginx (apt-get install -y wrk nginx-light), a release build.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-2}
BACKEND_PORT=${BACKEND_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/proxy-runtime}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup wrk nginx
# Nothing is pinned here: the runtimes are compared on a shared machine.
PROXY_CPU=""
OTHER_CPU=""
start_pets_backend

MODES=(per_core multi_thread)
CONNECTIONS=(128 4)
for mode in "${MODES[@]}"; do
  cat >"$WORK/$mode.yaml" <<YAML
workers: $WORKERS
runtime: $mode
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    pool: { max_idle: 1024 }
routes:
  - { path: /, upstream: backend }
log: { level: warn }
YAML
  for c in "${CONNECTIONS[@]}"; do : >"$WORK/$mode.$c"; done
done

: >"$OUT/wrk.log"
for round in $(seq 0 "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    "$SLUICE" proxy -c "$WORK/$mode.yaml" >/dev/null 2>"$WORK/sluice.log" &
    PROXY_PID=$!
    wait_port "$PROXY_PORT"
    sleep 0.3
    for c in "${CONNECTIONS[@]}"; do
      before=$(cpu_ticks "$PROXY_PID"); started=$(date +%s.%N)
      out=$(wrk -t1 -c"$c" -d"$DURATION" "http://127.0.0.1:$PROXY_PORT/v1/pets" --latency)
      ended=$(date +%s.%N); after=$(cpu_ticks "$PROXY_PID")
      echo "$out" >>"$OUT/wrk.log"
      rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
      p99=$(awk '$1=="99%" {print $2}' <<<"$out")
      cost=$(awk -v t=$((after - before)) -v r="$rps" -v s="$started" -v e="$ended" 'BEGIN {printf "%.2f", t * 10000 / (r * (e - s))}')
      (( round == 0 )) && continue # warm-up round, discarded
      echo "round $round $mode c=$c: $rps req/s, p99 $p99, $cost us CPU/req" >&2
      echo "$rps $p99 $cost" >>"$WORK/$mode.$c"
    done
    kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; PROXY_PID=""
  done
done

TABLE="$OUT/table.md"
{
  echo "| connections | runtime | req/s (median) | vs per_core | p99 (median) | CPU us/req |"
  echo "|---:|---|---:|---:|---:|---:|"
  for c in "${CONNECTIONS[@]}"; do
    base=$(cut -d' ' -f1 "$WORK/per_core.$c" | median)
    for mode in "${MODES[@]}"; do
      r=$(cut -d' ' -f1 "$WORK/$mode.$c" | median)
      p99=$(cut -d' ' -f2 "$WORK/$mode.$c" | to_us | median)
      cost=$(cut -d' ' -f3 "$WORK/$mode.$c" | median)
      printf '| %s | %s | %.0f | %.2fx | %.0f us | %s |\n' "$c" "$mode" "$r" \
        "$(awk -v a="$r" -v b="$base" 'BEGIN{print a/b}')" "$p99" "$cost"
    done
  done
} >"$TABLE"
echo
echo "wrk -t1 -d$DURATION, sluice proxy with workers: $WORKERS, nothing pinned; medians of $ROUNDS rounds after a warm-up"
cat "$TABLE"
