#!/usr/bin/env bash
# A saturated Spring MVC alone and behind sluice (issue 26, part 9), the
# runtimes-io rows of `sluice bench` (seeds/003) with what they leave out:
# the proxy's log, /metrics and /upstreams after each row, and a choice of
# draining the backend between rows.
#
# Starts `sluice serve downstream`, the Spring MVC passthrough the bench
# builds (~/.cache/sluice/runtimes/spring-mvc-*/, from a `sluice bench
# --only runtimes --runtimes spring-mvc` run) and `sluice proxy` configured
# as the bench configures it (one worker, pool max_idle 16384, request
# timeout 30 s), then loads Tomcat directly (`alone`) and through the proxy
# (`sluice`) as the bench does: USERS users thinking 1-2 s, ramped over
# 1.5 s, 1.5 s warm-up, 3 s measured, 10 s timeout, posting the seed's
# message to a downstream that waits 300 ms.
#
# A row's users leave when its time is up, but Tomcat still answers every
# request it has read: the next row starts with Tomcat seconds behind
# (docs/PERFORMANCE.md, seeds/003). DRAIN=1 starts each row only once a
# request to Tomcat is answered within 0.6 s; DRAIN=0 runs them back to
# back, as the bench does.
#
#   SLUICE=target/release/sluice bench/spring-saturated.sh 5000
#   DRAIN=1 ROUNDS="warm m1 m2 m3" bench/spring-saturated.sh 3000
#   SYSTEMS="sluice alone" bench/spring-saturated.sh 5000   # sluice first
#   EXTRA='    max_connecting: 256' bench/spring-saturated.sh 5000
set -u
USERS=${1:-3000}
SLUICE=${SLUICE:-target/release/sluice}
ROUNDS=${ROUNDS:-warm m1}
SYSTEMS=${SYSTEMS:-alone sluice}
DRAIN=${DRAIN:-0}
EXTRA=${EXTRA:-} # more of the upstream's settings, e.g. '    max_connecting: 256'
PORT=${PORT:-19081} # downstream; Tomcat +1, proxy +2, admin +3
OUT=${OUT:-results/spring-saturated-$USERS-$(date +%H%M%S)}
mkdir -p "$OUT"
JAR=$(ls ~/.cache/sluice/runtimes/spring-mvc-*/spring-mvc/target/spring-mvc.jar 2>/dev/null | head -1)
if [ -z "$JAR" ]; then
    echo "no Spring MVC build: run sluice bench --only runtimes --runtimes spring-mvc first" >&2
    exit 2
fi
DOWN=$PORT TOMCAT=$((PORT + 1)) PROXY=$((PORT + 2)) ADMIN=$((PORT + 3))
BODY='{"id":"1","payload":"sample payload","delay":300}'

"$SLUICE" serve downstream --listen 127.0.0.1:$DOWN --workers 1 >"$OUT/downstream.log" 2>&1 &
PIDS=$!
java -jar "$JAR" --server.port=$TOMCAT --server.address=127.0.0.1 \
    --downstream=http://127.0.0.1:$DOWN >"$OUT/spring.log" 2>&1 &
PIDS="$PIDS $!"
cat >"$OUT/proxy.yaml" <<YAML
workers: 1
log: { level: warn }
limits: { max_connections: $((USERS + 64)) }
admin: { address: 127.0.0.1:$ADMIN }
listeners: [{ address: 127.0.0.1:$PROXY }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$TOMCAT"]
    pool: { max_idle: 16384 }
    timeouts: { request: 30s }
$EXTRA
routes:
  - { path: /, upstream: backend }
YAML
"$SLUICE" proxy -c "$OUT/proxy.yaml" >"$OUT/proxy.log" 2>&1 &
PIDS="$PIDS $!"
trap 'kill $PIDS 2>/dev/null; wait 2>/dev/null' EXIT

post() {
    curl -s -o /dev/null -w '%{time_total}' -m 30 -X POST \
        -H 'content-type: application/json' --data "$BODY" \
        http://127.0.0.1:$TOMCAT/passthrough/message
}
for _ in $(seq 1 60); do post >/dev/null && break; sleep 1; done
drain() {
    local started=$SECONDS took
    for _ in $(seq 1 60); do
        took=$(post)
        awk "BEGIN { exit !($took < 0.6) }" && break
    done
    echo "   drained in $((SECONDS - started)) s"
}
admin() { curl -s http://127.0.0.1:$ADMIN/$1; }

echo "users $USERS, drain $DRAIN, sluice $("$SLUICE" --version), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/info"
for round in $ROUNDS; do
    for system in $SYSTEMS; do
        port=$TOMCAT
        [ "$system" = sluice ] && port=$PROXY
        row=$system-$round
        "$SLUICE" load -q -u "$USERS" --think 1s..2s --ramp 1500ms --warmup 1500ms -d 3s \
            --timeout 10s -X POST -H 'content-type: application/json' --body "$BODY" \
            --json "$OUT/$row.json" http://127.0.0.1:$port/passthrough/message >"$OUT/$row.txt" 2>&1
        admin metrics >"$OUT/metrics-$row.txt"
        admin upstreams >"$OUT/upstreams-$row.json"
        echo "$row: $(grep -h 'Status codes' "$OUT/$row.txt") $(grep -h 'Requests/sec' "$OUT/$row.txt")"
        if [ "$DRAIN" = 1 ]; then drain; fi
    done
done
echo "proxy log, by message:"
sed -E 's/\x1b\[[0-9;]*m//g; s/^[^ ]+ +//; s/peer=[0-9.:]+//' "$OUT/proxy.log" | sort | uniq -c | sort -rn | head
echo "results in $OUT"
