#!/usr/bin/env bash
# Instructions per request of an HTTP/2 *server codec* alone, counted by
# callgrind: sluice's own (crates/http2, examples/h2c_server.rs) and the
# `h2` crate's (examples/h2_crate_server.rs), each answering every request
# with 1 KiB, each on one thread. `h2load -t1 -c4 -m8` sends N1 then N2
# requests to a fresh server each time; the cost per request is
# (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and shutdown cancel out.
#
#   bench/h2-codec-callgrind.sh
#
# Needs valgrind and h2load; builds the two examples in release.
set -euo pipefail

N1=${N1:-2000}
N2=${N2:-10000}
PORT=${PORT:-18295}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
for tool in valgrind h2load; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
cargo build --release --locked -p http2 --example h2c_server --example h2_crate_server >&2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

wait_port() {
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  exit 1
}

# Instructions the server $1 ran to serve $2 requests.
instructions() {
  local server=$1 n=$2
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$n" \
    "$ROOT/target/release/examples/$server" "127.0.0.1:$PORT" >/dev/null 2>"$WORK/vg.$n" &
  local pid=$!
  wait_port "$PORT"
  h2load -t1 -c4 -m8 -n "$n" "http://127.0.0.1:$PORT/v1/pets" >"$WORK/h2load.$n"
  grep -q "$n succeeded" "$WORK/h2load.$n" || { cat "$WORK/h2load.$n" >&2; exit 1; }
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  sed -n 's/^summary: //p; s/^totals: //p' "$WORK/cg.$n" | head -n 1
}

for server in h2c_server h2_crate_server; do
  a=$(instructions "$server" "$N1")
  b=$(instructions "$server" "$N2")
  echo "$server: $(( (b - a) / (N2 - N1) )) instructions per request ($a at $N1, $b at $N2)"
done
