#!/usr/bin/env bash
# sluice proxy against HAProxy with HTTP/2 clients (issue 16), in the same run.
#
# h2load (`-t1 -c16 -m32`, h2c with prior knowledge) loads each proxy in two
# scenarios:
#   h1   proxy -> HTTP/1.1 upstream (keep-alive, connection reuse)
#   h2c  proxy -> h2c upstream (prior knowledge, multiplexed)
# Both go to the same backend, `sluice serve petstore --workers 1`, which
# speaks HTTP/1.1 and h2c on one port and costs less CPU per request than
# nginx-light on either (docs/PERFORMANCE.md, issue 2 and `sluice load --h2
# vs h2load`): the backend shares its core with h2load, and the cheaper it
# is, the later that core becomes the limit. BACKEND=nginx runs the h1
# scenario alone against an nginx-light worker instead, to check that the
# choice of backend does not move the ratio (nginx 1.22 serves h2c only on a
# port of its own, and at about 10 us per HTTP/2 request it would be the
# limit of the h2c scenario).
# sluice: one worker, a plaintext listener (HTTP/1.1 and h2c on one port),
# upstream `protocol: http1` or `h2c`. HAProxy 2.6: `nbthread 1`,
# `bind ... proto h2`, `server ... proto h2` for h2c, and the settings
# docs/BENCH.md "How the peers are configured" gives it (http-reuse always,
# tune.pool-low/high-fd-ratio 90/95, keep-alive, the same timeouts).
# Rounds alternate which proxy goes first; round 0 is a discarded warm-up.
# Per round and as medians: req/s, the proxy's and the backend's CPU time per
# request (/proc/PID/stat before and after each run) and sluice / HAProxy,
# in req/s and in CPU per request (HAProxy's us/req / sluice's: what the
# req/s ratio tends to when the proxy's core, not the backend's, is the limit).
# The load average is printed and saved, since the machine may be shared.
#
#   bench/h2-clients.sh                        # 3 rounds of 10 s per cell
#   DURATION=5s ROUNDS=1 bench/h2-clients.sh
#   BACKEND=nginx bench/h2-clients.sh          # h1 scenario, nginx backend
#   PROFILE=1 bench/h2-clients.sh              # then perf record sluice, h2c
#
# With PROFILE=1, after the rounds sluice runs the h2c scenario once more
# under `perf record -F 1000 --call-graph dwarf` for 6 s (software cpu-clock event:
# works where hardware counters are not exposed); the report is in
# OUT/perf-h2c.txt. Results: OUT/table.md, OUT/runs.log (h2load's output).
#
# Needs: h2load, haproxy (apt-get install -y nghttp2-client haproxy),
# nginx-light with BACKEND=nginx, perf with PROFILE=1, a release build.
# With 2+ CPUs each proxy runs alone on CPU 1; the backend and h2load share
# CPU 0 (the same for both proxies).
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-32}
BACKEND=${BACKEND:-sluice}
PROFILE=${PROFILE:-0}
BACKEND_PORT=${BACKEND_PORT:-18490}
PROXY_PORT=${PROXY_PORT:-18491}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/h2-clients}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

tools=(h2load haproxy taskset)
[[ $BACKEND == nginx ]] && tools+=(nginx)
[[ $PROFILE == 1 ]] && tools+=(perf)
proxy_bench_setup "${tools[@]}"
case $BACKEND in
  sluice)
    SCENARIOS=(h1 h2c)
    $OTHER_CPU "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$BACKEND_PORT" >/dev/null 2>"$WORK/backend.log" &
    BACKEND_PID=$!
    wait_port "$BACKEND_PORT"
    ;;
  nginx) SCENARIOS=(h1); start_pets_backend ;;
  *) echo "BACKEND must be sluice or nginx" >&2; exit 2 ;;
esac
BACKEND_WORKER=$BACKEND_PID # the process that does the work: nginx's worker, not its master
if [[ $BACKEND == nginx ]]; then
  for _ in $(seq 50); do BACKEND_WORKER=$(pgrep -P "$BACKEND_PID" | head -1) && break; sleep 0.05; done
fi
PROXIES=(sluice haproxy)

for scenario in "${SCENARIOS[@]}"; do
  protocol=http1; server_proto=""
  [[ $scenario == h2c ]] && { protocol=h2c; server_proto=" proto h2"; }
  cat >"$WORK/sluice-$scenario.yaml" <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    protocol: $protocol
    pool: { max_idle: 16384 }
    timeouts: { request: 30s }
routes:
  - { path: /, upstream: backend }
log: { level: warn }
YAML
  cat >"$WORK/haproxy-$scenario.cfg" <<CFG
global
  nbthread 1
  maxconn 8000
  tune.pool-low-fd-ratio 90
  tune.pool-high-fd-ratio 95
defaults
  mode http
  option http-keep-alive
  timeout connect 2s
  timeout client 60s
  timeout server 30s
  timeout http-keep-alive 60s
  http-reuse always
frontend front
  bind 127.0.0.1:$PROXY_PORT proto h2
  default_backend back
backend back
  server b0 127.0.0.1:$BACKEND_PORT$server_proto
CFG
done

# start_proxy NAME SCENARIO: starts it on CPU 1; sets PROXY_PID.
start_proxy() {
  case $1 in
    sluice) $PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice-$2.yaml" >/dev/null 2>"$WORK/sluice.log" & PROXY_PID=$! ;;
    haproxy) $PROXY_CPU haproxy -db -f "$WORK/haproxy-$2.cfg" >/dev/null 2>"$WORK/haproxy.log" & PROXY_PID=$! ;;
  esac
  wait_port "$PROXY_PORT"
  sleep 0.3
}

# run_h2load LABEL -> "requests/s errors proxy-cpu-us-per-request backend-cpu-us-per-request"
run_h2load() {
  local out proxy_before proxy_after backend_before backend_after rps done errors
  proxy_before=$(cpu_ticks "$PROXY_PID"); backend_before=$(cpu_ticks "$BACKEND_WORKER")
  out=$($OTHER_CPU h2load -t1 -c"$CONNS" -m"$STREAMS" -D "$DURATION" "http://127.0.0.1:$PROXY_PORT/v1/pets")
  proxy_after=$(cpu_ticks "$PROXY_PID"); backend_after=$(cpu_ticks "$BACKEND_WORKER")
  printf '%s\n%s\n' "$1" "$(grep -v '^progress:' <<<"$out")" >>"$OUT/runs.log"
  rps=$(awk '/^finished in/ {print $4}' <<<"$out")
  done=$(awk '/^requests:/ {print $6}' <<<"$out")
  # Failed requests (errored and timed-out ones included) and answers other than 2xx.
  errors=$(awk '/^requests:/ {n += $10} /^status codes:/ {n += $5 + $7 + $9} END {print n + 0}' <<<"$out")
  # Ticks are 1/100 s: ticks * 10,000 / requests = microseconds per request.
  awk -v r="$rps" -v e="$errors" -v d="$done" -v p=$((proxy_after - proxy_before)) -v b=$((backend_after - backend_before)) \
    'BEGIN {if (d == 0) d = 1; printf "%s %s %.2f %.2f\n", r, e, p * 10000 / d, b * 10000 / d}'
}

: >"$OUT/runs.log"
LOAD_START=$(load_average)
echo "load average at start: $LOAD_START" >&2
for s in "${SCENARIOS[@]}"; do for p in "${PROXIES[@]}"; do : >"$WORK/$s.$p"; done; : >"$WORK/$s.ratio"; done

for round in $(seq 0 "$ROUNDS"); do
  order=("${PROXIES[@]}")
  (( round % 2 == 0 )) && order=(haproxy sluice)
  for s in "${SCENARIOS[@]}"; do
    declare -A line=()
    for p in "${order[@]}"; do
      start_proxy "$p" "$s"
      read -r rps errors cost backend_cost < <(run_h2load "round $round $s $p")
      stop_proxy
      line[$p]="$rps $errors $cost $backend_cost"
      (( round == 0 )) || echo "$rps $errors $cost $backend_cost" >>"$WORK/$s.$p"
    done
    (( round == 0 )) && continue # warm-up round, discarded
    read -r srps serr scost sback <<<"${line[sluice]}"
    read -r hrps herr hcost hback <<<"${line[haproxy]}"
    ratio=$(awk -v a="$srps" -v b="$hrps" 'BEGIN {printf "%.2f", a / b}')
    echo "$ratio" >>"$WORK/$s.ratio"
    printf 'round %s %s: sluice %.0f req/s %s us CPU/req (backend %s), haproxy %.0f req/s %s us CPU/req (backend %s), errors %s/%s, sluice/haproxy %sx [load %s]\n' \
      "$round" "$s" "$srps" "$scost" "$sback" "$hrps" "$hcost" "$hback" "$serr" "$herr" "$ratio" "$(load_average)" >&2
  done
done
LOAD_END=$(load_average)

TABLE="$OUT/table.md"
{
  echo "| upstream | proxy | req/s per round | req/s (median) | sluice / HAProxy per round | sluice / HAProxy (of medians) | proxy CPU us/req (median) | HAProxy CPU / this CPU | backend CPU us/req (median) | errors |"
  echo "|---|---|---|---:|---|---:|---:|---:|---:|---:|"
  for s in "${SCENARIOS[@]}"; do
    h=$(cut -d' ' -f1 "$WORK/$s.haproxy" | median); hcost=$(cut -d' ' -f3 "$WORK/$s.haproxy" | median)
    for p in "${PROXIES[@]}"; do
      r=$(cut -d' ' -f1 "$WORK/$s.$p" | median)
      rounds=$(awk '{printf "%s%.0f", (NR > 1 ? " / " : ""), $1}' "$WORK/$s.$p")
      ratios=""; [[ $p == sluice ]] && ratios=$(paste -sd/ "$WORK/$s.ratio" | sed 's#/# / #g')
      cost=$(cut -d' ' -f3 "$WORK/$s.$p" | median)
      printf '| %s | %s | %s | %.0f | %s | %.2fx | %s | %.2fx | %s | %s |\n' "$s" "$p" "$rounds" "$r" "$ratios" \
        "$(awk -v a="$r" -v b="$h" 'BEGIN {print a / b}')" "$cost" "$(awk -v a="$hcost" -v b="$cost" 'BEGIN {print a / b}')" \
        "$(cut -d' ' -f4 "$WORK/$s.$p" | median)" "$(awk '{n += $2} END {print n}' "$WORK/$s.$p")"
    done
  done
} >"$TABLE"
{
  echo
  echo "h2load -t1 -c$CONNS -m$STREAMS -D $DURATION (h2c prior knowledge); backend: $BACKEND; medians of $ROUNDS rounds after a warm-up, proxies alternating; each proxy (1 worker) on CPU 1, backend and h2load on CPU 0"
  echo "load average: $LOAD_START at start, $LOAD_END at end ($(nproc) CPUs)"
} >>"$TABLE"

if [[ $PROFILE == 1 && " ${SCENARIOS[*]} " == *" h2c "* ]]; then
  start_proxy sluice h2c
  $OTHER_CPU h2load -t1 -c"$CONNS" -m"$STREAMS" -D 8s "http://127.0.0.1:$PROXY_PORT/v1/pets" >"$OUT/perf-h2load.log" &
  load_pid=$!
  sleep 1 # past the connection set-up
  perf record -q -e cpu-clock -F 1000 --call-graph dwarf,8192 -o "$OUT/perf-h2c.data" -p "$PROXY_PID" -- sleep 6
  wait "$load_pid"
  stop_proxy
  perf report -i "$OUT/perf-h2c.data" --stdio --no-children --percent-limit 0.5 -g none --sort dso,symbol >"$OUT/perf-h2c.txt" 2>/dev/null
  perf report -i "$OUT/perf-h2c.data" --stdio --children --percent-limit 2 -g none --sort symbol >"$OUT/perf-h2c-children.txt" 2>/dev/null
  echo "profile: $OUT/perf-h2c.txt (self), $OUT/perf-h2c-children.txt (inclusive)" >&2
fi

echo
cat "$TABLE"
