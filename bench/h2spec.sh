#!/usr/bin/env bash
# HTTP/2 conformance of sluice's listeners: h2spec (github.com/summerwind/h2spec)
# against an h2c-only port (`protocols: [h2]`, prior knowledge) and a TLS
# port (ALPN h2) of a `sluice proxy` whose routes lead to a
# `sluice serve static` backend. (A plaintext port serving both HTTP/1.1 and h2c answers bytes
# that are not the HTTP/2 preface as HTTP/1.1, so h2spec's "invalid
# connection preface" case gets a 400 there, by design.)
#
#   bench/h2spec.sh                  # both ports; exit 1 on any failed case
#   SLUICE=target/debug/sluice bench/h2spec.sh   # what .ci/run does
#
# Needs: h2spec on PATH, or Go to install it (`go install github.com/summerwind/h2spec/cmd/h2spec@v2.6.0`
# into target/tools). Reports land in results/h2spec/ as JUnit XML.
set -euo pipefail

BACKEND_PORT=${BACKEND_PORT:-18190}
PLAIN_PORT=${PLAIN_PORT:-18191}
TLS_PORT=${TLS_PORT:-18192}
CORE_PORT=${CORE_PORT:-18193}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/h2spec}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
H2SPEC_VERSION=v2.6.0
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

if ! command -v h2spec >/dev/null; then
  if [[ ! -x $ROOT/target/tools/h2spec ]]; then
    command -v go >/dev/null || { echo "missing h2spec, and go to install it" >&2; exit 2; }
    # The module proxy has withdrawn some tags (v2.6.0 answered 403 in
    # November 2026): fall back to the newest it serves.
    GOBIN=$ROOT/target/tools go install "github.com/summerwind/h2spec/cmd/h2spec@$H2SPEC_VERSION" ||
      GOBIN=$ROOT/target/tools go install "github.com/summerwind/h2spec/cmd/h2spec@latest"
  fi
  PATH=$ROOT/target/tools:$PATH
fi

proxy_bench_setup
"$SLUICE" serve static --listen "127.0.0.1:$BACKEND_PORT" --workers 1 >/dev/null 2>&1 &
BACKEND_PID=$!
wait_port "$BACKEND_PORT"
"$SLUICE" cert --out "$WORK/certs" --hosts localhost,127.0.0.1 >/dev/null

cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners:
  - address: 127.0.0.1:$PLAIN_PORT
    protocols: [h2]
  - address: 127.0.0.1:$TLS_PORT
    tls: { cert: $WORK/certs/server.pem, key: $WORK/certs/server.key.pem }
upstreams:
  backend: { hosts: ["http://127.0.0.1:$BACKEND_PORT"] }
routes:
  - { path: /, upstream: backend }
log: { level: error }
YAML
"$SLUICE" proxy --config "$WORK/sluice.yaml" &
PROXY_PID=$!
wait_port "$PLAIN_PORT"

failed=0
h2spec --strict -h 127.0.0.1 -p "$PLAIN_PORT" -o 5 -j "$OUT/h2c.xml" | tail -4 || failed=1
h2spec --strict -h 127.0.0.1 -p "$TLS_PORT" -t -k -o 5 -j "$OUT/tls.xml" | tail -4 || failed=1
# sluice's own HTTP/2 codec (crates/http2, issue 45), before it is on the
# proxy's data path: its connection core behind the plain h2c server of
# its example, built with the tests (`cargo test` builds examples).
CORE_SERVER=${CORE_SERVER:-$(dirname "$SLUICE")/examples/h2c_server}
if [[ -x $CORE_SERVER ]]; then
  "$CORE_SERVER" "127.0.0.1:$CORE_PORT" 2>/dev/null &
  CORE_PID=$!
  wait_port "$CORE_PORT"
  h2spec --strict -h 127.0.0.1 -p "$CORE_PORT" -o 5 -j "$OUT/core.xml" | tail -4 || failed=1
  kill "$CORE_PID" 2>/dev/null || true
else
  echo "h2spec: no $CORE_SERVER (cargo build -p http2 --example h2c_server): the codec's own run left out"
fi
if (( failed )); then
  echo "h2spec: failures (details in $OUT)" >&2
  exit 1
fi
echo "h2spec: every case passed on the h2c and the TLS port (and sluice's own codec where it ran)"
