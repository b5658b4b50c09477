#!/usr/bin/env bash
# Compares `sluice load --h2` with h2load against the same h2c server
# (HTTP/2 with prior knowledge, answering the petstore list), in
# alternating runs, medians of ROUNDS: -t1 -c16 -m64 (the target: sluice
# load at least 1.0x h2load), -t1 -c16 -m1 and -t1 -c128 -m8. The server is
# nginx-light (one worker, `listen ... http2`) or, with TARGET=sluice,
# `sluice serve petstore --workers 1` (h2c on its plain port).
#
#   bench/load-h2-vs-h2load.sh                 # 3 rounds of 10 s per case
#   DURATION=5s ROUNDS=1 bench/load-h2-vs-h2load.sh
#   TARGET=sluice bench/load-h2-vs-h2load.sh
#
# Needs h2load (apt-get install -y nghttp2-client), taskset, and nginx-light
# unless TARGET=sluice.
# nginx is pinned to CPU 1 and both load generators to CPU 0 (with one
# CPU, nothing is pinned).
set -euo pipefail

DURATION=${DURATION:-10s}
TARGET=${TARGET:-nginx}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18091}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/load-h2-vs-h2load}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
URL="http://127.0.0.1:$PORT/v1/pets"

tools="h2load taskset"
[[ $TARGET == nginx ]] && tools="$tools nginx"
for tool in $tools; do
  case $tool in h2load) package=nghttp2-client ;; nginx) package=nginx-light ;; *) package=util-linux ;; esac
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y $package" >&2; exit 2; }
done
[[ -x $SLUICE ]] || (cd "$ROOT" && cargo build --release --locked -p sluice)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (( $(nproc) >= 2 )); then SERVER_CPU="taskset -c 1"; LOAD_CPU="taskset -c 0"; else SERVER_CPU=""; LOAD_CPU=""; fi
mkdir -p "$OUT"
WORK=$(mktemp -d)
SERVER=""
cleanup() { [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

if [[ $TARGET == nginx ]]; then
  write_nginx_conf "$WORK" "$PORT" "$PETS" application/json http2
  $SERVER_CPU nginx -c "$WORK/nginx.conf" -p "$WORK" &
else
  $SERVER_CPU "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
fi
SERVER=$!
wait_port "$PORT"

# rps TOOL CONNECTIONS STREAMS -> requests/s
rps() {
  local tool=$1 connections=$2 streams=$3 out
  if [[ $tool == h2load ]]; then
    out=$($LOAD_CPU h2load -t1 -c"$connections" -m"$streams" -D "$DURATION" "$URL")
    echo "$out" >>"$OUT/runs.log"
    awk '/^finished in/ {print $4}' <<<"$out"
  else
    out=$($LOAD_CPU "$SLUICE" load -q --h2 -t1 -c"$connections" -m"$streams" -d"$DURATION" "$URL")
    echo "$out" >>"$OUT/runs.log"
    if grep -q '^  Errors:' <<<"$out"; then echo "sluice load reported errors" >&2; fi
    awk '/^Requests\/sec:/ {print $2}' <<<"$out"
  fi
}

: >"$OUT/runs.log"
TABLE="$OUT/table.md"
{
  echo "| case | sluice load --h2 req/s | h2load req/s | ratio |"
  echo "|---|---:|---:|---:|"
} >"$TABLE"
rps h2load 16 64 >/dev/null; rps sluice 16 64 >/dev/null   # warm-up, discarded
for case in "16 64" "16 1" "128 8"; do
  read -r connections streams <<<"$case"
  : >"$WORK/s"; : >"$WORK/h"
  for round in $(seq "$ROUNDS"); do
    s=$(rps sluice "$connections" "$streams"); h=$(rps h2load "$connections" "$streams")
    echo "-c$connections -m$streams round $round: sluice load $s, h2load $h" >&2
    echo "$s" >>"$WORK/s"; echo "$h" >>"$WORK/h"
  done
  s=$(median <"$WORK/s"); h=$(median <"$WORK/h")
  printf '| -t1 -c%s -m%s | %.0f | %.0f | %.2fx |\n' "$connections" "$streams" "$s" "$h" "$(awk -v s="$s" -v h="$h" 'BEGIN {print s/h}')" >>"$TABLE"
done

echo
echo "target: $TARGET h2c, one worker ($URL); medians of $ROUNDS alternating rounds of $DURATION"
cat "$TABLE"
