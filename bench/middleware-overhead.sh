#!/usr/bin/env bash
# What each middleware handler costs (seeds/000's question): the same
# route through sluice with an empty chain, with each handler alone, and
# with the full default chain, in the same run.
#
# An nginx-light backend (one worker) answers GET /v1/pets with the
# petstore JSON. One sluice proxy (one worker) has a route per scenario,
# told apart by Host, so that every scenario runs on the same process:
# `wrk -t1 -c128 -d10s -H "Host: SCENARIO" .../v1/pets`. Rounds alternate
# the scenarios; medians of requests/s, average latency, transfer/s and
# the proxy's CPU per request are printed with the overhead against the
# empty chain. Each round starts one scenario later than the last; the
# access log is written to /dev/shm. The jwt scenarios send a token minted by `sluice token`
# (RS256, verified once, then served from the cache).
#
#   bench/middleware-overhead.sh                   # 3 rounds of 10 s
#   DURATION=5s ROUNDS=1 bench/middleware-overhead.sh
#   ONLY="empty jwt validate default" ROUNDS=5 bench/middleware-overhead.sh
#
# Needs: wrk, nginx (apt-get install -y wrk nginx-light), a release build.
# With 2+ CPUs the proxy runs alone on CPU 1; the backend and wrk share CPU 0.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-128}
BACKEND_PORT=${BACKEND_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/middleware-overhead}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup wrk nginx taskset
# The access log goes to memory: disk writeback would land on whichever
# scenario runs next.
LOG_DIR=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
CLEANUP_PATHS+=("$LOG_DIR")
start_pets_backend

# Test keys and a token for the jwt scenarios.
"$SLUICE" token keys --alg RS256 --kid bench --out "$WORK/keys" >/dev/null
TOKEN=$("$SLUICE" token sign --key "$WORK/keys/bench.key.pem" --alg RS256 --kid bench \
  --claim iss=https://issuer.example --claim aud=petstore --claim scope=pets:read --expires-in 1h)

# scenario name -> chain; 'default' is the full chain below (correlation, metrics,
# access_log, jwt, validate, rate_limit, headers): question 3 of docs/BENCH.md.
ALL=(empty correlation headers metrics cors ip_filter body_limit access_log rate_limit jwt validate default)
# ONLY="empty jwt validate" runs a subset (empty is the baseline and must be in it).
read -r -a SCENARIOS <<<"${ONLY:-${ALL[*]}}"
declare -A CHAIN=(
  [empty]="[]"
  [correlation]="[correlation]"
  [headers]="[headers]"
  [metrics]="[metrics]"
  [cors]="[cors]"
  [ip_filter]="[ip_filter]"
  [body_limit]="[body_limit]"
  [access_log]="[access_log]"
  [rate_limit]="[rate_limit]"
  [jwt]="[jwt]"
  [validate]="[validate]"
  [default]="default"
)
{
  cat <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    pool: { max_idle: 1024 }
middleware:
  access_log: { path: "$LOG_DIR/access.log" }
  headers: { request: { set: { x-env: bench } }, response: { set: { x-served-by: sluice } } }
  ip_filter: { allow: [127.0.0.0/8] }
  body_limit: { max: 1MiB }
  jwt: { jwks: "$WORK/keys/jwks.json", algorithms: [RS256], issuer: "https://issuer.example", audience: [petstore], scopes: [pets:read] }
  validate: { openapi: "$ROOT/specs/petstore.yaml" }
  rate_limit: { rate: 1000000/s }
chains:
  default: [correlation, metrics, access_log, jwt, validate, rate_limit, headers]
routes:
YAML
  for s in "${ALL[@]}"; do
    echo "  - { path: /, host: $s, chain: ${CHAIN[$s]}, upstream: backend }"
  done
  echo "log: { level: warn }"
} >"$WORK/sluice.yaml"

$PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >/dev/null 2>"$WORK/sluice.log" &
PROXY_PID=$!
wait_port "$PROXY_PORT"
sleep 0.3

for s in "${SCENARIOS[@]}"; do : >"$WORK/$s"; done
: >"$OUT/wrk.log"
for round in $(seq 0 "$ROUNDS"); do
  # Each round starts one scenario later, so no scenario always follows the same one.
  for i in "${!SCENARIOS[@]}"; do
    s=${SCENARIOS[$(( (i + round) % ${#SCENARIOS[@]} ))]}
    : >"$LOG_DIR/access.log"
    before=$(cpu_ticks "$PROXY_PID"); started=$(date +%s.%N)
    out=$($OTHER_CPU wrk -t1 -c"$CONNS" -d"$DURATION" -H "Host: $s" -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$PROXY_PORT/v1/pets")
    ended=$(date +%s.%N); after=$(cpu_ticks "$PROXY_PID")
    echo "== $s round $round" >>"$OUT/wrk.log"; echo "$out" >>"$OUT/wrk.log"
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    avg=$(awk '$1=="Latency" {print $2}' <<<"$out" | to_us)
    transfer=$(awk '/^Transfer\/sec:/ {print $2}' <<<"$out")
    errors=$(awk '/Non-2xx/ {n+=$NF} /Socket errors/ {gsub(",",""); n+=$4+$6+$8+$10} END {print n+0}' <<<"$out")
    cost=$(awk -v t=$((after - before)) -v r="$rps" -v s="$started" -v e="$ended" 'BEGIN {printf "%.2f", t * 10000 / (r * (e - s))}')
    (( round == 0 )) && continue # warm-up round, discarded
    echo "round $round $s: $rps req/s, avg ${avg}us, $errors errors, $cost us CPU/req" >&2
    echo "$rps $avg $transfer $errors $cost" >>"$WORK/$s"
  done
done

TABLE="$OUT/table.md"
base=$(cut -d' ' -f1 "$WORK/empty" | median)
base_cost=$(cut -d' ' -f5 "$WORK/empty" | median)
{
  echo "| Test Case | Max Throughput | Avg Latency | Transfer | Times (vs empty chain) | Overhead | CPU us/req | errors |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for s in "${SCENARIOS[@]}"; do
    r=$(cut -d' ' -f1 "$WORK/$s" | median)
    avg=$(cut -d' ' -f2 "$WORK/$s" | median)
    transfer=$(cut -d' ' -f3 "$WORK/$s" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    cost=$(cut -d' ' -f5 "$WORK/$s" | median)
    errs=$(awk '{n+=$4} END {print n}' "$WORK/$s")
    printf '| %s | %.0f | %.0f us | %s | %.3f | %.1f%% | %s (%+.1f%%) | %s |\n' "$s" "$r" "$avg" "$transfer" \
      "$(awk -v a="$r" -v b="$base" 'BEGIN{print a/b}')" "$(awk -v a="$r" -v b="$base" 'BEGIN{print (1-a/b)*100}')" \
      "$cost" "$(awk -v a="$cost" -v b="$base_cost" 'BEGIN{print (a/b-1)*100}')" "$errs"
  done
} >"$TABLE"
echo
echo "wrk -t1 -c$CONNS -d$DURATION GET /v1/pets by Host; sluice (1 worker) on CPU 1, nginx backend and wrk on CPU 0; medians of $ROUNDS rounds after a warm-up"
cat "$TABLE"
