#!/usr/bin/env bash
# What TLS and HTTP/2 cost on each side of sluice, in one run.
#
# One nginx-light backend answers the petstore JSON on three ports:
# HTTP/1.1, h2c (prior knowledge) and h2 over TLS. One sluice worker has a
# plaintext and a TLS listener, and a route per upstream protocol. wrk
# (HTTP/1.1 keep-alive, -t1 -c128) then measures four paths:
#   plain-h1   plaintext listener -> HTTP/1.1 upstream (the baseline)
#   tls-h1     TLS listener       -> HTTP/1.1 upstream (target >= 0.85x baseline)
#   plain-h2c  plaintext listener -> h2c upstream      (target >= 0.90x)
#   plain-h2   plaintext listener -> h2 + TLS upstream (target >= 0.85x)
# Rounds rotate the order; medians and the ratio to the baseline, with
# sluice's CPU per request, are printed.
#
#   bench/protocols.sh                      # 3 rounds of 10 s per path
#   DURATION=5s ROUNDS=1 bench/protocols.sh
#
# Needs: wrk, nginx (apt-get install -y wrk nginx-light), a release build.
# With 2+ CPUs sluice runs alone on CPU 1; nginx and wrk share CPU 0.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-128}
BACKEND_PORT=${BACKEND_PORT:-18390}   # and the next two: h2c, h2 over TLS
PROXY_PORT=${PROXY_PORT:-18394}       # and the next one: TLS
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/protocols}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup wrk nginx taskset
H2C_PORT=$((BACKEND_PORT + 1)); H2_PORT=$((BACKEND_PORT + 2)); TLS_PORT=$((PROXY_PORT + 1))
"$SLUICE" cert --out "$WORK/certs" --hosts localhost,127.0.0.1 >/dev/null
CERTS=$WORK/certs

mkdir -p "$WORK/backend"
cat >"$WORK/backend/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/backend/nginx-error.log warn;
pid $WORK/backend/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  http2_max_requests 100000000;
  http2_max_concurrent_streams 256;
  ssl_certificate $CERTS/server.pem;
  ssl_certificate_key $CERTS/server.key.pem;
  server {
    listen 127.0.0.1:$BACKEND_PORT backlog=8192;
    listen 127.0.0.1:$H2C_PORT http2 backlog=8192;
    listen 127.0.0.1:$H2_PORT ssl http2 backlog=8192;
    location / { default_type application/json; return 200 '$PETS'; }
  }
}
NGINX
$OTHER_CPU nginx -c "$WORK/backend/nginx.conf" -p "$WORK/backend" &
BACKEND_PID=$!
wait_port "$BACKEND_PORT"

cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners:
  - address: 127.0.0.1:$PROXY_PORT
  - address: 127.0.0.1:$TLS_PORT
    tls: { cert: $CERTS/server.pem, key: $CERTS/server.key.pem }
upstreams:
  h1:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    pool: { max_idle: 1024 }
  h2c:
    hosts: ["http://127.0.0.1:$H2C_PORT"]
    protocol: h2c
  h2:
    hosts: ["https://127.0.0.1:$H2_PORT"]
    protocol: h2
    tls: { ca: $CERTS/ca.pem }
routes:
  - { path: /h1/, upstream: h1 }
  - { path: /h2c/, upstream: h2c }
  - { path: /h2/, upstream: h2 }
log: { level: warn }
YAML
$PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >/dev/null 2>"$WORK/sluice.log" &
PROXY_PID=$!
wait_port "$PROXY_PORT"

declare -A URLS=(
  [plain-h1]="http://127.0.0.1:$PROXY_PORT/h1/pets"
  [tls-h1]="https://127.0.0.1:$TLS_PORT/h1/pets"
  [plain-h2c]="http://127.0.0.1:$PROXY_PORT/h2c/pets"
  [plain-h2]="http://127.0.0.1:$PROXY_PORT/h2/pets"
)
PATHS=(plain-h1 tls-h1 plain-h2c plain-h2)

# run_wrk PATH -> "requests/s errors cpu-us-per-request"
run_wrk() {
  local out before after started ended rps errors cost
  before=$(cpu_ticks "$PROXY_PID"); started=$(date +%s.%N)
  out=$($OTHER_CPU wrk -t1 -c"$CONNS" -d"$DURATION" "${URLS[$1]}")
  ended=$(date +%s.%N); after=$(cpu_ticks "$PROXY_PID")
  echo "$1: $out" >>"$OUT/wrk.log"
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx/ {n+=$NF} /Socket errors/ {gsub(",",""); n+=$4+$6+$8+$10} END {print n+0}' <<<"$out")
  cost=$(awk -v t=$((after - before)) -v r="$rps" -v s="$started" -v e="$ended" 'BEGIN {printf "%.2f", t * 10000 / (r * (e - s))}')
  echo "$rps $errors $cost"
}

: >"$OUT/wrk.log"
for p in "${PATHS[@]}"; do : >"$WORK/$p"; done
for round in $(seq 0 "$ROUNDS"); do
  for i in "${!PATHS[@]}"; do
    p=${PATHS[$(( (i + round) % ${#PATHS[@]} ))]}
    read -r rps errors cost < <(run_wrk "$p")
    (( round == 0 )) && continue # warm-up round, discarded
    echo "round $round $p: $rps req/s, errors $errors, $cost us CPU/req" >&2
    echo "$rps $errors $cost" >>"$WORK/$p"
  done
done

TABLE="$OUT/table.md"
base=$(cut -d' ' -f1 "$WORK/plain-h1" | median)
{
  echo "| path | req/s (median) | vs plain-h1 | target | errors | sluice CPU us/req |"
  echo "|---|---:|---:|---:|---:|---:|"
  declare -A TARGET=([plain-h1]="" [tls-h1]=">= 0.85x" [plain-h2c]=">= 0.90x" [plain-h2]=">= 0.85x")
  for p in "${PATHS[@]}"; do
    r=$(cut -d' ' -f1 "$WORK/$p" | median)
    errs=$(awk '{n+=$2} END {print n}' "$WORK/$p")
    cost=$(cut -d' ' -f3 "$WORK/$p" | median)
    printf '| %s | %.0f | %.2fx | %s | %s | %s |\n' "$p" "$r" "$(awk -v a="$r" -v b="$base" 'BEGIN{print a/b}')" "${TARGET[$p]}" "$errs" "$cost"
  done
} >"$TABLE"
echo
echo "wrk -t1 -c$CONNS -d$DURATION, keep-alive; medians of $ROUNDS rounds after a warm-up; sluice (1 worker) on CPU 1, nginx backend and wrk on CPU 0"
cat "$TABLE"
