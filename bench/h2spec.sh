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
if (( failed )); then
  echo "h2spec: failures (details in $OUT)" >&2
  exit 1
fi
echo "h2spec: every case passed on the h2c and the TLS port"
