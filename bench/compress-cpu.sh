#!/usr/bin/env bash
# What response compression costs per request: sluice's `compress` against
# nginx's gzip at the same level, same body, same run (issue 47).
#
# An nginx-light origin (one worker, on CPU 0) serves one JSON body (about
# 20 KB, the kind of list an API answers) as a static file. In front of it,
# on CPU 1, one at a time: sluice (one worker; a route per scenario) and
# nginx as a reverse proxy (one worker, `master_process off`; a location
# per scenario, `gzip_comp_level` set there). Each scenario is
# `wrk -t1 -c16 -d$DURATION -H 'Accept-Encoding: ...'` on CPU 0; the
# proxy's CPU time (utime + stime of its one process) over the run divided
# by the requests answered is its CPU per request. gzip is compared with
# nginx's defaults (32 KiB window, memLevel 8: sluice `window_bits: 15,
# memory_level: 8`); `plain` is the same route without compression, so
# the difference is what compressing costs. Brotli and Zstandard rows are
# sluice's alone (nginx-light has neither). Medians over ROUNDS rounds.
#
#   bench/compress-cpu.sh                         # 3 rounds of 3 s
#   DURATION=2s ROUNDS=1 bench/compress-cpu.sh
#
# Needs: wrk, nginx, curl, taskset, a release build (SLUICE=...).
set -euo pipefail

DURATION=${DURATION:-3s}
ROUNDS=${ROUNDS:-3}
ORIGIN_PORT=${ORIGIN_PORT:-18290}
SLUICE_PORT=${SLUICE_PORT:-18291}
NGINX_PORT=${NGINX_PORT:-18292}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/compress-cpu}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup wrk nginx curl taskset

# The body: 20 KB of JSON objects, the same bytes every run.
mkdir -p "$WORK/origin/www"
awk 'BEGIN { srand(47); printf "["; for (i = 0; i < 240; i++) {
  printf "%s{\"id\":%d,\"name\":\"pet-%d\",\"tag\":\"%s\",\"owner\":{\"id\":%d,\"city\":\"%s\"},\"weight\":%.2f}",
    (i ? "," : ""), i, int(rand() * 100000), (rand() < 0.5 ? "cat" : "dog"), int(rand() * 5000),
    (rand() < 0.3 ? "Berlin" : (rand() < 0.5 ? "Lisbon" : "Osaka")), rand() * 40 }
  printf "]" }' >"$WORK/origin/www/pets.json"
BODY_BYTES=$(wc -c <"$WORK/origin/www/pets.json")
cat >"$WORK/origin/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/origin/error.log warn;
pid $WORK/origin/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  types { application/json json; }
  server { listen 127.0.0.1:$ORIGIN_PORT backlog=8192; root $WORK/origin/www;
    location / { try_files /pets.json =404; } }
}
NGINX
# nginx's worker runs as nobody: WORK (mktemp -d, mode 0700) must be
# readable, or every answer is nginx's 153-byte 403 and nothing is compressed.
chmod 755 "$WORK" "$WORK/origin" "$WORK/origin/www"
chmod 644 "$WORK/origin/www/pets.json"
$OTHER_CPU nginx -c "$WORK/origin/nginx.conf" -p "$WORK/origin" &
BACKEND_PID=$!
wait_port "$ORIGIN_PORT"
served=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "http://127.0.0.1:$ORIGIN_PORT/pets.json")
if [[ $served != "200 $BODY_BYTES" ]]; then
  echo "the origin answers '$served', not 200 with the $BODY_BYTES-byte body: see $WORK/origin/error.log" >&2
  exit 1
fi

# scenario -> (Accept-Encoding, sluice compress settings or "", nginx gzip level or "")
GZIP_LEVELS=(1 3 5 6 9)
SCENARIOS=(plain)
declare -A ACCEPT=([plain]=gzip) SETTINGS=([plain]="") NGINX_LEVEL=([plain]=off)
for level in "${GZIP_LEVELS[@]}"; do
  SCENARIOS+=("gzip$level")
  ACCEPT[gzip$level]=gzip
  SETTINGS[gzip$level]="{ algorithms: [gzip], gzip: { level: $level, window_bits: 15, memory_level: 8 } }"
  NGINX_LEVEL[gzip$level]=$level
done
SCENARIOS+=(gzip5-default br1 br4 br6 zstd1 zstd3 zstd6)
ACCEPT[gzip5-default]=gzip; SETTINGS[gzip5-default]="{ algorithms: [gzip] }"
for q in 1 4 6; do ACCEPT[br$q]=br; SETTINGS[br$q]="{ algorithms: [br], br: { quality: $q } }"; done
for l in 1 3 6; do ACCEPT[zstd$l]=zstd; SETTINGS[zstd$l]="{ algorithms: [zstd], zstd: { level: $l } }"; done

# sluice: a route per scenario.
{
  echo "workers: 1"
  echo "listeners: [{ address: 127.0.0.1:$SLUICE_PORT }]"
  echo "upstreams: { origin: { hosts: [\"http://127.0.0.1:$ORIGIN_PORT\"] } }"
  echo "middleware:"
  for s in "${SCENARIOS[@]}"; do
    [[ -n ${SETTINGS[$s]} ]] && echo "  c-$s: { compress: ${SETTINGS[$s]} }"
  done
  echo "routes:"
  for s in "${SCENARIOS[@]}"; do
    chain="[]"; [[ -n ${SETTINGS[$s]} ]] && chain="[c-$s]"
    echo "  - { path: /$s, chain: $chain, upstream: origin }"
  done
} >"$WORK/sluice.yaml"
# nginx as a proxy: a location per gzip scenario, the prefix taken off.
{
  echo "worker_processes 1; master_process off; daemon off;"
  echo "error_log $WORK/nginx-proxy.log warn; pid $WORK/nginx-proxy.pid;"
  echo "events { worker_connections 4096; }"
  echo "http { access_log off; keepalive_requests 1000000;"
  echo "  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 64; }"
  echo "  gzip_types application/json; gzip_min_length 1024; gzip_proxied any; gzip_vary on;"
  echo "  server { listen 127.0.0.1:$NGINX_PORT backlog=8192;"
  for s in plain "${GZIP_LEVELS[@]/#/gzip}"; do
    level=${NGINX_LEVEL[$s]}
    gzip="gzip on; gzip_comp_level $level;"; [[ $level == off ]] && gzip="gzip off;"
    echo "    location /$s/ { $gzip proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_pass http://origin; }"
  done
  echo "  }"
  echo "}"
} >"$WORK/nginx-proxy.conf"

# run PROXY SCENARIO PORT: "requests/s cpu_us_per_request wire_bytes"
run() {
  local proxy=$1 scenario=$2 port=$3 url out requests ticks_before ticks_after wire
  url="http://127.0.0.1:$port/$scenario/pets.json"
  wire=$(curl -s -o /dev/null -w '%{size_download}' -H "Accept-Encoding: ${ACCEPT[$scenario]}" "$url")
  ticks_before=$(cpu_ticks "$PROXY_PID")
  out=$($OTHER_CPU wrk -t1 -c16 -d"$DURATION" -H "Accept-Encoding: ${ACCEPT[$scenario]}" "$url")
  ticks_after=$(cpu_ticks "$PROXY_PID")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -v r="$requests" -v t="$((ticks_after - ticks_before))" -v d="${DURATION%s}" -v w="$wire" \
    'BEGIN { printf "%.0f %.1f %d\n", r / d, t * 10000 / r, w }'
}

start_sluice() {
  $PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >"$WORK/sluice.log" 2>&1 &
  PROXY_PID=$!
  wait_port "$SLUICE_PORT"
}
start_nginx_proxy() {
  $PROXY_CPU nginx -c "$WORK/nginx-proxy.conf" -p "$WORK" &
  PROXY_PID=$!
  wait_port "$NGINX_PORT"
}

declare -A RESULTS
for round in $(seq "$ROUNDS"); do
  start_sluice
  for s in "${SCENARIOS[@]}"; do RESULTS["sluice $s $round"]=$(run sluice "$s" "$SLUICE_PORT"); done
  stop_proxy
  start_nginx_proxy
  for s in plain "${GZIP_LEVELS[@]/#/gzip}"; do RESULTS["nginx $s $round"]=$(run nginx "$s" "$NGINX_PORT"); done
  stop_proxy
done

field() { # field PROXY SCENARIO N: the median of the Nth figure over the rounds
  for round in $(seq "$ROUNDS"); do awk -v n="$3" '{print $n}' <<<"${RESULTS["$1 $2 $round"]}"; done | median
}
{
  echo "## Compression CPU per request ($(date -u +%Y-%m-%dT%H:%MZ), body $BODY_BYTES B JSON, wrk -t1 -c16 -d$DURATION, $ROUNDS rounds, medians; load average $(load_average))"
  echo
  echo "| scenario | sluice req/s | sluice CPU µs/req | sluice compressing µs/req | sluice bytes | nginx req/s | nginx CPU µs/req | nginx compressing µs/req | nginx bytes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  sluice_plain=$(field sluice plain 2); nginx_plain=$(field nginx plain 2)
  for s in "${SCENARIOS[@]}"; do
    sc=$(field sluice "$s" 2)
    row="| $s | $(field sluice "$s" 1) | $sc | $(awk -v a="$sc" -v b="$sluice_plain" 'BEGIN{printf "%.1f", a-b}') | $(field sluice "$s" 3)"
    if [[ -n ${NGINX_LEVEL[$s]:-} ]]; then
      nc=$(field nginx "$s" 2)
      row+=" | $(field nginx "$s" 1) | $nc | $(awk -v a="$nc" -v b="$nginx_plain" 'BEGIN{printf "%.1f", a-b}') | $(field nginx "$s" 3) |"
    else
      row+=" | – | – | – | – |"
    fi
    echo "$row"
  done
} | tee "$OUT/report.md"
