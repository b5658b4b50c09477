#!/usr/bin/env bash
# HTTP/3 clients through sluice with `workers: 2`: how the QUIC work
# spreads over the workers (one UDP socket and endpoint per worker since
# issue 44's step 4) and what it delivers, against an older build with
# one endpoint on the first worker (BEFORE, optional). `sluice load --h3`
# with CONNS connections of 8 streams each, after a 2 s warm-up; the
# proxy's CPU from /proc; /stats.json's per-worker counts (they include
# the warm-up's connections). Nothing is pinned: the loader, the backend
# and the proxy share the machine's CPUs, so compare rows of one run.
#
#   bench/h3-workers.sh
#   BEFORE=/tmp/sluice-old CONNS="16 64" ROUNDS=2 bench/h3-workers.sh
#
# Needs a release build.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
BEFORE=${BEFORE:-}
CONNS=${CONNS:-16 64}
ROUNDS=${ROUNDS:-1}
DURATION=${DURATION:-5s}
PORT=${PORT:-18443}
ADMIN_PORT=${ADMIN_PORT:-18444}
BACKEND_PORT=${BACKEND_PORT:-18092}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT

"$SLUICE" cert --out "$WORK/certs" >/dev/null
"$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$BACKEND_PORT" >/dev/null 2>&1 &
cat >"$WORK/sluice.yaml" <<YAML
workers: 2
listeners:
  - address: 127.0.0.1:$PORT
    protocols: [h2, http1, h3]
    tls: { cert: $WORK/certs/server.pem, key: $WORK/certs/server.key.pem }
admin: { address: 127.0.0.1:$ADMIN_PORT }
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
routes:
  - { path: /, upstream: backend }
log: { level: warn }
YAML

load() {
  "$SLUICE" load -q --h3 -t1 -c"$1" -m8 -d"$2" --cacert "$WORK/certs/ca.pem" \
    "https://127.0.0.1:$PORT/v1/pets" 2>&1
}

builds=("after $SLUICE")
[[ -n $BEFORE ]] && builds=("before $BEFORE" "${builds[@]}")
echo "| build | connections | req/s | proxy CPU µs/req | connections per worker | requests per worker | datagrams steered |"
echo "|---|---:|---:|---:|---|---|---:|"
for round in $(seq "$ROUNDS"); do
  for build in "${builds[@]}"; do
    read -r name bin <<<"$build"
    for conns in $CONNS; do
      "$bin" proxy -c "$WORK/sluice.yaml" >"$WORK/proxy.log" 2>&1 &
      pid=$!
      wait_port "$PORT"
      load "$conns" 2s >/dev/null
      t0=$(cpu_ticks "$pid")
      out=$(load "$conns" "$DURATION")
      t1=$(cpu_ticks "$pid")
      grep -q '^  Errors:' <<<"$out" && echo "round $round, $name: sluice load reported errors" >&2
      n=$(awk '/requests in/ {print $1; exit}' <<<"$out")
      rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
      per=$(curl -s "http://127.0.0.1:$ADMIN_PORT/stats.json" | python3 -c '
import json, sys
c = json.load(sys.stdin)["connections"]
print(c.get("h3_connections_per_worker", "-"), "|", c.get("h3_streams_per_worker", "-"), "|", c.get("h3_datagrams_steered", "-"))')
      awk -v b="$name" -v c="$conns" -v r="$rps" -v n="$n" -v t=$((t1 - t0)) -v p="$per" \
        'BEGIN { printf "| %s | %s | %s | %.1f | %s |\n", b, c, r, t * 1e4 / n, p }'
      kill "$pid"
      wait "$pid" 2>/dev/null || true
    done
  done
done
echo
echo "load average $(load_average)"
