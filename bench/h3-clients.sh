#!/usr/bin/env bash
# HTTP/3 clients through sluice and through Caddy (the one HTTP/3 peer that
# runs here), same run, each proxy on one CPU with one worker
# (GOMAXPROCS=1 for Caddy), in front of the same HTTP/1.1 backend
# (`sluice serve petstore --workers 1`); `sluice load --h3` as the client,
# and `--h2` over TLS beside it for sluice's own HTTP/2 row. For each
# case: req/s and the proxy's CPU microseconds per request (/proc), medians
# of ROUNDS (issue 31's figures: docs/PERFORMANCE.md).
#
#   bench/h3-clients.sh                      # 3 rounds of 10 s per case
#   DURATION=5s ROUNDS=1 bench/h3-clients.sh
#
# Needs caddy (bash bench/install-peers.sh), taskset, a release build.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
STREAMS=${STREAMS:-32}
PORT=${PORT:-18443}
BACKEND_PORT=${BACKEND_PORT:-18092}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/h3-clients}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
CADDY=${CADDY:-$(command -v caddy || echo "${XDG_CACHE_HOME:-$HOME/.cache}/sluice/peers/bin/caddy")}
proxy_bench_setup taskset
"$SLUICE" cert --out "$WORK/certs" >/dev/null
$OTHER_CPU "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$BACKEND_PORT" >/dev/null 2>&1 &
BACKEND_PID=$!
wait_port "$BACKEND_PORT"

start_sluice() {
  cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners:
  - address: 127.0.0.1:$PORT
    protocols: [h2, http1, h3]
    tls: { cert: $WORK/certs/server.pem, key: $WORK/certs/server.key.pem }
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
routes:
  - { path: /, upstream: backend }
log: { level: warn }
YAML
  $PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >"$WORK/proxy.log" 2>&1 &
  PROXY_PID=$!
  wait_port "$PORT"
}

# Caddy in front of the same backend (bench/lib.sh's start_caddy).
start_caddy_proxy() {
  start_caddy "	reverse_proxy http://127.0.0.1:$BACKEND_PORT {
		transport http {
			keepalive_idle_conns 1024
			keepalive_idle_conns_per_host 1024
			versions 1.1
		}
	}"
}

# measure FLAG -> "req/s proxy_us_per_request"
measure() {
  local flag=$1 before after out requests rps
  before=$(cpu_ticks "$PROXY_PID")
  out=$($OTHER_CPU "$SLUICE" load -q "$flag" -t1 -c"$CONNECTIONS" -m"$STREAMS" \
      -d"$DURATION" --cacert "$WORK/certs/ca.pem" "https://127.0.0.1:$PORT/v1/pets" 2>&1)
  after=$(cpu_ticks "$PROXY_PID")
  echo "$out" >>"$OUT/runs.log"
  grep -q '^  Errors:' <<<"$out" && echo "sluice load $flag reported errors" >&2
  requests=$(awk '/requests in/ {print $1; exit}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  awk -v rps="$rps" -v n="$requests" -v c=$((after - before)) 'BEGIN {
    printf "%s %.1f\n", rps, c * 1e4 / n }'
}

mkdir -p "$OUT"
: >"$OUT/runs.log"
TABLE="$OUT/table.md"
{
  echo "| proxy | clients | req/s | proxy CPU µs/req |"
  echo "|---|---|---:|---:|"
} >"$TABLE"
cases=("sluice --h3" "sluice --h2")
if [[ -x $CADDY ]]; then
  cases+=("caddy_proxy --h3")
else
  echo "skipped: Caddy (not installed: bash bench/install-peers.sh)" | tee -a "$TABLE"
fi
for case in "${cases[@]}"; do
  read -r proxy flag <<<"$case"
  "start_$proxy"
  measure "$flag" >/dev/null   # warm-up, discarded
  : >"$WORK/r"; : >"$WORK/c"
  for round in $(seq "$ROUNDS"); do
    read -r r c < <(measure "$flag")
    echo "$proxy $flag round $round: $r req/s, $c us/req" >&2
    echo "$r" >>"$WORK/r"; echo "$c" >>"$WORK/c"
  done
  printf '| %s | %s | %.0f | %s |\n' "${proxy%_proxy}" "${flag#--}" "$(median <"$WORK/r")" "$(median <"$WORK/c")" >>"$TABLE"
  stop_proxy
done

echo
echo "sluice load -t1 -c$CONNECTIONS -m$STREAMS -d$DURATION against each proxy (1 worker, GOMAXPROCS=1 for Caddy) in front of sluice serve; medians of $ROUNDS; load average $(load_average)"
cat "$TABLE"
