#!/usr/bin/env bash
# Compares `sluice serve petstore|static` with nginx-light returning the same
# bytes, one worker each, under wrk -t1 -c128, plain and with pipeline.lua at
# depth 16. Rounds alternate sluice and nginx; the table shows medians and
# each server's CPU time per request (from /proc). CLIENT=sluice drives the
# same runs with `sluice load`, which saturates the servers where wrk cannot.
#
#   bench/backends-vs-nginx.sh                  # 3 rounds of 10 s per cell
#   DURATION=5s ROUNDS=1 bench/backends-vs-nginx.sh
#   CLIENT=sluice bench/backends-vs-nginx.sh
#
# Needs: wrk, nginx (apt-get install -y wrk nginx-light), a release build.
# With 2+ CPUs the servers are pinned to CPU 1 and wrk to CPU 0.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-128}
DEPTH=${DEPTH:-16}
# wrk (the issue's yardstick) or sluice (sluice load, which drives harder: shows server capacity)
CLIENT=${CLIENT:-wrk}
SLUICE_PORT=${SLUICE_PORT:-18080}
NGINX_PORT=${NGINX_PORT:-18081}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/backends-vs-nginx}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

for tool in wrk nginx taskset; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y wrk nginx-light util-linux" >&2; exit 2; }
done
[[ -x $SLUICE ]] || (cd "$ROOT" && cargo build --release --locked -p sluice)

if (( $(nproc) >= 2 )); then SERVER_CPU="taskset -c 1"; LOAD_CPU="taskset -c 0"; else SERVER_CPU=""; LOAD_CPU=""; fi
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# The same 1 KiB that `sluice serve static` sends.
STATIC=$(python3 -c 'import itertools;print("".join(itertools.islice(itertools.cycle("abcdefghijklmnopqrstuvwxyz0123456789"),1024)),end="")')

start_nginx() {
  write_nginx_conf "$WORK" "$NGINX_PORT" "$1" "$2"
  $SERVER_CPU nginx -c "$WORK/nginx.conf" -p "$WORK" &
  PIDS+=($!)
  wait_port "$NGINX_PORT"
}

start_sluice() {
  $SERVER_CPU "$SLUICE" serve "$1" --workers 1 --listen "127.0.0.1:$SLUICE_PORT" 2>"$WORK/sluice.log" >/dev/null &
  PIDS+=($!)
  wait_port "$SLUICE_PORT"
}

stop_servers() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }


# run_client PORT PATH MODE SERVER_PID -> "requests/s p99 server-CPU-us-per-request"
# (p99 is "-" for wrk pipelined: wrk times batches, not requests)
run_client() {
  local port=$1 path=$2 mode=$3 pid=$4 out depth=1 before after started ended
  [[ $mode == pipelined ]] && depth=$DEPTH
  before=$(cpu_ticks "$pid"); started=$(date +%s.%N)
  if [[ $CLIENT == sluice ]]; then
    out=$($LOAD_CPU "$SLUICE" load -q -t1 -c"$CONNS" -d"$DURATION" --pipeline "$depth" -H 'J-Tenant-Id: 1007' "http://127.0.0.1:$port$path")
  elif [[ $mode == pipelined ]]; then
    out=$($LOAD_CPU wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$port" -s "$ROOT/bench/pipeline.lua" --latency -- "$path" "$DEPTH")
  else
    out=$($LOAD_CPU wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$port$path" --latency)
  fi
  ended=$(date +%s.%N); after=$(cpu_ticks "$pid")
  echo "$out" >>"$OUT/client.log"
  local rps p99 errors cost
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errors=$(grep -E 'Socket errors|Non-2xx|Errors:' <<<"$out" || true)
  [[ -z $errors ]] || echo "  warning: $errors" >&2
  [[ $CLIENT == wrk && $mode == pipelined ]] && p99="-"
  cost=$(awk -v t=$((after - before)) -v r="$rps" -v s="$started" -v e="$ended" 'BEGIN {printf "%.2f", t * 10000 / (r * (e - s))}')
  echo "$rps $p99 $cost"
}



: >"$OUT/client.log"
: >"$OUT/rss.txt"
TABLE="$OUT/table.md"
{
  echo "| service | mode | sluice req/s | nginx req/s | ratio | sluice p99 | nginx p99 | sluice CPU us/req | nginx CPU us/req |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$TABLE"

for service in petstore static; do
  if [[ $service == petstore ]]; then body=$PETS; type=application/json; path=/v1/pets; else body=$STATIC; type=text/plain; path=/; fi
  start_sluice "$service"
  start_nginx "$body" "$type"
  # Warm-up round, discarded.
  sluice_pid=${PIDS[0]}; nginx_pid=$(pgrep -P "${PIDS[1]}" | head -1)
  run_client "$SLUICE_PORT" "$path" plain "$sluice_pid" >/dev/null; run_client "$NGINX_PORT" "$path" plain "$nginx_pid" >/dev/null
  for mode in plain pipelined; do
    : >"$WORK/sluice.$mode"; : >"$WORK/nginx.$mode"
    for round in $(seq "$ROUNDS"); do
      read -r s_rps s_p99 s_cost < <(run_client "$SLUICE_PORT" "$path" "$mode" "$sluice_pid")
      read -r n_rps n_p99 n_cost < <(run_client "$NGINX_PORT" "$path" "$mode" "$nginx_pid")
      echo "$service $mode round $round: sluice $s_rps req/s (p99 $s_p99, $s_cost us CPU/req), nginx $n_rps req/s (p99 $n_p99, $n_cost us CPU/req)" >&2
      echo "$s_rps $s_p99 $s_cost" >>"$WORK/sluice.$mode"; echo "$n_rps $n_p99 $n_cost" >>"$WORK/nginx.$mode"
    done
    s=$(cut -d' ' -f1 "$WORK/sluice.$mode" | median); n=$(cut -d' ' -f1 "$WORK/nginx.$mode" | median)
    sp=$(cut -d' ' -f2 "$WORK/sluice.$mode" | tr '\n' ' '); np=$(cut -d' ' -f2 "$WORK/nginx.$mode" | tr '\n' ' ')
    sc=$(cut -d' ' -f3 "$WORK/sluice.$mode" | median); nc=$(cut -d' ' -f3 "$WORK/nginx.$mode" | median)
    ratio=$(awk -v s="$s" -v n="$n" 'BEGIN {printf "%.2f", s/n}')
    printf '| %s | %s | %.0f | %.0f | %sx | %s | %s | %s | %s |\n' "$service" "$mode" "$s" "$n" "$ratio" "$sp" "$np" "$sc" "$nc" >>"$TABLE"
  done
  echo "$service: peak RSS sluice $(rss_kib "${PIDS[0]}" VmHWM) KiB, nginx worker $(rss_kib "$(pgrep -P "${PIDS[1]}" | head -1)" VmHWM) KiB" >>"$OUT/rss.txt"
  stop_servers
done

echo
echo "client $CLIENT -t1 -c$CONNS -d$DURATION, pipelined at depth $DEPTH; medians of $ROUNDS alternating rounds; p99 per round; server CPU per request (median)"
cat "$TABLE"
echo
cat "$OUT/rss.txt"
