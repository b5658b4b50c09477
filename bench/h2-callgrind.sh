#!/usr/bin/env bash
# Instructions per HTTP/2 client request, counted by callgrind (the method
# of docs/PERFORMANCE.md, "HTTP/2 clients (issue 16), after"): the release
# proxy, one worker, runs under `valgrind --tool=callgrind` in front of
# `sluice serve petstore`; `h2load -t1 -c4 -m8` sends N1 then N2 requests
# to a fresh proxy each time, and the cost per request is
# (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and shutdown cancel out.
#
#   bench/h2-callgrind.sh                        # HTTP/1.1 upstream
#   UPSTREAM=h2c bench/h2-callgrind.sh           # h2c upstream
#   SLUICE=/tmp/sluice-before bench/h2-callgrind.sh
#   KEEP=/tmp/prof bench/h2-callgrind.sh         # keep the N2 profile for callgrind_annotate
#   BACKEND_SLUICE=/tmp/sluice-before ...        # the backend from another build (its HPACK
#                                                # encoder sets what the proxy decodes)
#
# Needs: valgrind, h2load (apt-get install -y valgrind nghttp2-client), a
# release build.
set -euo pipefail

N1=${N1:-2000}
N2=${N2:-10000}
UPSTREAM=${UPSTREAM:-http1}
BACKEND_PORT=${BACKEND_PORT:-18290}
PROXY_PORT=${PROXY_PORT:-18291}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
for tool in valgrind h2load; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
WORK=$(mktemp -d)
"${BACKEND_SLUICE:-$SLUICE}" serve petstore --workers 1 --listen "127.0.0.1:$BACKEND_PORT" >/dev/null 2>&1 &
BACKEND_PID=$!
trap 'kill "$BACKEND_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cat >"$WORK/proxy.yaml" <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  pets: { hosts: ["http://127.0.0.1:$BACKEND_PORT"], protocol: $UPSTREAM }
routes: [{ path: /, upstream: pets }]
YAML

wait_port() {
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  exit 1
}

# Instructions the proxy ran to serve $1 requests (start and stop included).
instructions() {
  local n=$1
  RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.$n" \
    "$SLUICE" proxy -c "$WORK/proxy.yaml" >/dev/null 2>"$WORK/valgrind.$n" &
  local proxy=$!
  wait_port "$PROXY_PORT"
  h2load -t1 -c4 -m8 -n "$n" "http://127.0.0.1:$PROXY_PORT/v1/pets" >"$WORK/h2load.$n"
  grep -q "$n succeeded" "$WORK/h2load.$n" || { cat "$WORK/h2load.$n" >&2; exit 1; }
  kill -TERM "$proxy"
  wait "$proxy" || true
  grep -o "Collected : [0-9]*" "$WORK/valgrind.$n" | grep -o "[0-9]*$"
}

wait_port "$BACKEND_PORT"
first=$(instructions "$N1")
second=$(instructions "$N2")
if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$WORK/callgrind.$N2" "$KEEP/callgrind.$UPSTREAM"; fi
echo "h2c clients -> $UPSTREAM upstream: $(((second - first) / (N2 - N1))) instructions per request"
