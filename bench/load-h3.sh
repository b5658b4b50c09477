#!/usr/bin/env bash
# `sluice load --h3` against Caddy (quic-go, GOMAXPROCS=1, HTTP/3 on its
# https listener), in two setups, each also loaded with `--h2` over TLS
# for comparison, medians of ROUNDS:
# - static: Caddy answers the petstore list itself (`respond`): the
#   fastest HTTP/3 server here, to find the load generator's own ceiling;
# - proxy: Caddy in front of `sluice serve petstore --workers 1` over
#   HTTP/1.1 (the protocols group's "h3 clients -> HTTP/1.1" row).
# For each it reads the CPU time of the generator (bash's `time`) and of
# Caddy (/proc) and prints CPU microseconds per request: the generator
# outpaces a server when it needs less CPU per request than the server.
#
#   bench/load-h3.sh                         # 3 rounds of 10 s per case
#   DURATION=5s ROUNDS=1 bench/load-h3.sh
#
# Needs caddy (bash bench/install-peers.sh puts it in
# ~/.cache/sluice/peers/bin) and taskset. Caddy on CPU 1; the generator
# and the backend on CPU 0 (with one CPU, nothing is pinned).
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
STREAMS=${STREAMS:-32}
PORT=${PORT:-18443}
BACKEND_PORT=${BACKEND_PORT:-18092}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/load-h3}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
CADDY=${CADDY:-$(command -v caddy || echo "${XDG_CACHE_HOME:-$HOME/.cache}/sluice/peers/bin/caddy")}
[[ -x $CADDY ]] || { echo "missing caddy: bash bench/install-peers.sh" >&2; exit 2; }
proxy_bench_setup taskset
"$SLUICE" cert --out "$WORK/certs" >/dev/null
$OTHER_CPU "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$BACKEND_PORT" >/dev/null 2>&1 &
BACKEND_PID=$!
wait_port "$BACKEND_PORT"

# measure FLAG -> "req/s generator_us_per_request caddy_us_per_request"
measure() {
  local flag=$1 before after out times requests rps
  before=$(cpu_ticks "$PROXY_PID")
  out=$( { TIMEFORMAT='%U %S'; time $OTHER_CPU "$SLUICE" load -q "$flag" -t1 -c"$CONNECTIONS" -m"$STREAMS" \
      -d"$DURATION" --cacert "$WORK/certs/ca.pem" "https://127.0.0.1:$PORT/v1/pets"; } 2>&1)
  after=$(cpu_ticks "$PROXY_PID")
  echo "$out" >>"$OUT/runs.log"
  grep -q '^  Errors:' <<<"$out" && echo "sluice load $flag reported errors" >&2
  times=$(tail -n1 <<<"$out")
  requests=$(awk '/requests in/ {print $1; exit}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  awk -v rps="$rps" -v n="$requests" -v t="$times" -v c=$((after - before)) 'BEGIN {
    split(t, u, " "); printf "%s %.1f %.1f\n", rps, (u[1] + u[2]) * 1e6 / n, c * 1e4 / n }'
}

: >"$OUT/runs.log"
TABLE="$OUT/table.md"
{
  echo "| Caddy setup | client | req/s | generator CPU µs/req | Caddy CPU µs/req | generator ceiling, req/s per core |"
  echo "|---|---|---:|---:|---:|---:|"
} >"$TABLE"
for setup in static proxy; do
  if [[ $setup == static ]]; then
    start_caddy "	header Content-Type application/json
	respond \`$PETS\` 200"
  else
    start_caddy "	reverse_proxy http://127.0.0.1:$BACKEND_PORT {
		transport http {
			keepalive_idle_conns 1024
			keepalive_idle_conns_per_host 1024
			versions 1.1
		}
	}"
  fi
  measure --h3 >/dev/null   # warm-up, discarded
  for flag in --h3 --h2; do
    : >"$WORK/r"; : >"$WORK/g"; : >"$WORK/c"
    for round in $(seq "$ROUNDS"); do
      read -r r g c < <(measure "$flag")
      echo "$setup $flag round $round: $r req/s, generator $g us/req, caddy $c us/req" >&2
      echo "$r" >>"$WORK/r"; echo "$g" >>"$WORK/g"; echo "$c" >>"$WORK/c"
    done
    r=$(median <"$WORK/r"); g=$(median <"$WORK/g"); c=$(median <"$WORK/c")
    printf '| %s | sluice load %s | %.0f | %s | %s | %.0f |\n' "$setup" "$flag" "$r" "$g" "$c" \
      "$(awk -v g="$g" 'BEGIN {print 1e6 / g}')" >>"$TABLE"
  done
  stop_proxy
done

echo
echo "Caddy $("$CADDY" version | cut -d' ' -f1), GOMAXPROCS=1; sluice load -t1 -c$CONNECTIONS -m$STREAMS -d$DURATION; medians of $ROUNDS; load average $(load_average)"
cat "$TABLE"
