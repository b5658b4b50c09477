#!/usr/bin/env bash
# Compares `sluice load` with wrk against the same target, in alternating
# runs, medians of ROUNDS: -t1 -c128 plain, -t1 -c128 pipelined at depth 16
# (wrk with seeds/000's pipeline.lua), and -t2 -c128 plain. Then checks that
# sluice load's peak RSS stays flat from a short to a long run.
#
#   bench/load-vs-wrk.sh                       # 3 rounds of 10 s, RSS 10 s vs 60 s
#   DURATION=5s ROUNDS=1 LONG=20s bench/load-vs-wrk.sh
#   TARGET=nginx bench/load-vs-wrk.sh          # nginx-light instead of sluice serve
#
# Needs wrk (apt-get install -y wrk), nginx-light for TARGET=nginx, GNU time.
# The target is pinned to CPU 1; with -t1 the load generator is pinned to CPU 0,
# with -t2 neither is pinned (both tools get the same treatment).
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
SHORT=${SHORT:-10s}
LONG=${LONG:-60s}
TARGET=${TARGET:-sluice}
PORT=${PORT:-18090}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/load-vs-wrk}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
URL="http://127.0.0.1:$PORT/v1/pets"

for tool in wrk taskset /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y wrk util-linux time" >&2; exit 2; }
done
[[ -x $SLUICE ]] || (cd "$ROOT" && cargo build --release --locked -p sluice)
mkdir -p "$OUT"
WORK=$(mktemp -d)
SERVER=""
cleanup() { [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

if [[ $TARGET == nginx ]]; then
  write_nginx_conf "$WORK" "$PORT" "$PETS" application/json
  taskset -c 1 nginx -c "$WORK/nginx.conf" -p "$WORK" &
else
  taskset -c 1 "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
fi
SERVER=$!
wait_port "$PORT"

# rps TOOL THREADS MODE -> requests/s
rps() {
  local tool=$1 threads=$2 mode=$3 pin="" out
  [[ $threads == 1 ]] && pin="taskset -c 0"
  if [[ $tool == wrk ]]; then
    if [[ $mode == pipelined ]]; then
      out=$($pin wrk -t"$threads" -c128 -d"$DURATION" "http://127.0.0.1:$PORT" -s "$ROOT/bench/pipeline.lua" -- /v1/pets 16)
    else
      out=$($pin wrk -t"$threads" -c128 -d"$DURATION" "$URL")
    fi
  else
    local depth=1
    [[ $mode == pipelined ]] && depth=16
    out=$($pin "$SLUICE" load -q -t"$threads" -c128 -d"$DURATION" --pipeline "$depth" -H 'J-Tenant-Id: 1007' "$URL")
  fi
  echo "$out" >>"$OUT/runs.log"
  awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}

: >"$OUT/runs.log"
TABLE="$OUT/table.md"
{
  echo "| case | sluice load req/s | wrk req/s | ratio |"
  echo "|---|---:|---:|---:|"
} >"$TABLE"
rps wrk 1 plain >/dev/null; rps sluice 1 plain >/dev/null   # warm-up, discarded
for case in "1 plain" "1 pipelined" "2 plain"; do
  read -r threads mode <<<"$case"
  : >"$WORK/s"; : >"$WORK/w"
  for round in $(seq "$ROUNDS"); do
    s=$(rps sluice "$threads" "$mode"); w=$(rps wrk "$threads" "$mode")
    echo "-t$threads $mode round $round: sluice load $s, wrk $w" >&2
    echo "$s" >>"$WORK/s"; echo "$w" >>"$WORK/w"
  done
  s=$(median <"$WORK/s"); w=$(median <"$WORK/w")
  printf '| -t%s -c128 %s | %.0f | %.0f | %.2fx |\n' "$threads" "$mode" "$s" "$w" "$(awk -v s="$s" -v w="$w" 'BEGIN {print s/w}')" >>"$TABLE"
done

# Peak RSS of sluice load (KiB) for a short and a long run.
peak() { /usr/bin/time -f '%M' taskset -c 0 "$SLUICE" load -q -t1 -c128 -d"$1" "$URL" 2>&1 >/dev/null | tail -1; }
short=$(peak "$SHORT"); long=$(peak "$LONG")
echo
echo "target: $TARGET ($URL); medians of $ROUNDS alternating rounds of $DURATION"
cat "$TABLE"
echo
echo "sluice load peak RSS: $short KiB for $SHORT, $long KiB for $LONG"
