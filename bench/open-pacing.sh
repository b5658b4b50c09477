#!/usr/bin/env bash
# sluice load's open model (--rate) against `sluice serve petstore --workers 1`
# (issue 33): corrected and uncorrected latency and the generator's own send
# lateness at each of RATES, the generator's CPU at CPU_RATES, and k6's
# constant-arrival-rate at K6_RATE on the same target, side by side.
#
#   bench/open-pacing.sh                        # RATES="1000 5000 20000", 6 s each
#   H2_RATES="5000 20000" bench/open-pacing.sh  # the HTTP/2 rows (--h2 -c16 -m4) at these rates
#   SLUICE_BEFORE=/tmp/sluice-main bench/open-pacing.sh   # also another build, first
#
# Needs GNU time, taskset (util-linux), python3; k6 on PATH or in ~/go/bin
# for the k6 row (`go install go.k6.io/k6@v1.8.1`), which is skipped without
# it. Target on CPU 0, load generator (either) on CPU 1. One row per run:
# latencies in µs, the rate achieved and the requests due but never sent
# (whether the generator held its timetable: the test suite checks only that
# sent + unsent = due, not how close to the target rate a machine gets), CPU
# as user+system seconds of the generator's process over its whole run
# (start-up included), per request and as a share of one core.
set -euo pipefail

DURATION=${DURATION:-6s}
RATES=${RATES:-1000 5000 20000}
CPU_RATES=${CPU_RATES:-100 1000}
K6_RATE=${K6_RATE:-5000}
K6_VUS=${K6_VUS:-400}
CONNECTIONS=${CONNECTIONS:-64}
H2_RATES=${H2_RATES:-5000}
PORT=${PORT:-18093}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/open-pacing}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
SLUICE_BEFORE=${SLUICE_BEFORE:-}
K6=${K6:-$(command -v k6 || echo "$HOME/go/bin/k6")}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
URL="http://127.0.0.1:$PORT/v1/pets"

for tool in taskset /usr/bin/time python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y util-linux time python3" >&2; exit 2; }
done
[[ -x $SLUICE ]] || (cd "$ROOT" && cargo build --release --locked -p sluice)
mkdir -p "$OUT"
WORK=$(mktemp -d)
SERVER=""
cleanup() { [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

taskset -c 0 "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
SERVER=$!
wait_port "$PORT"
# The target's first seconds are not measured.
taskset -c 1 "$SLUICE" load -q --rate 5000 -d2s -c"$CONNECTIONS" "$URL" >/dev/null

# row LABEL RATE JSON TIMES: one table row from a sluice load JSON report or
# a k6 summary, and GNU time's `user system elapsed`.
row() {
  python3 - "$@" <<'PY'
import json, sys
label, rate, path, times = sys.argv[1:5]
user, system, elapsed = map(float, open(times).read().split()[-3:])
data = json.load(open(path))
if "metrics" in data:  # k6: trends in ms, http_req_duration from its own send
    d = data["metrics"]["http_req_duration"]["values"]
    requests = data["metrics"]["http_reqs"]["values"]["count"]
    dropped = data["metrics"].get("dropped_iterations", {}).get("values", {}).get("count", 0)
    cells = [d["med"] * 1000, d["p(99)"] * 1000, None, None, None, None, None]
    cells += [data["metrics"]["http_reqs"]["values"]["rate"], dropped]
    note = "k6: unsent is its dropped iterations"
else:
    p = lambda summary, q: next(x["value_us"] for x in summary["percentiles"] if x["percentile"] == q)
    u = data["uncorrected_latency"]
    l = data["schedule"].get("lateness")
    cells = [p(data["latency"], 50.0), p(data["latency"], 99.0), p(u, 50.0), p(u, 99.0)]
    cells += [l["p50_us"], l["p99_us"], l["max_us"]] if l else [None] * 3
    cells += [data["schedule"]["achieved_rate"], data["schedule"]["unsent"]]
    requests = data["requests"]
    note = "warning: generator-bound" if data["schedule"].get("generator_bound") else ""
cpu = user + system
fmt = lambda v: "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
print(f"| {label} | {float(rate):,.0f} | " + " | ".join(fmt(c) for c in cells)
      + f" | {requests:,.0f} | {cpu:.2f} | {cpu * 1e6 / max(requests, 1):.1f} | {100 * cpu / elapsed:.1f}% | {note} |")
PY
}

# sluice_run LABEL BINARY RATE [LOAD OPTIONS]: -c$CONNECTIONS unless given
sluice_run() {
  local label=$1 bin=$2 rate=$3 json="$OUT/${1// /-}-$3.json"
  shift 3
  (( $# )) || set -- -c"$CONNECTIONS"
  /usr/bin/time -f '%U %S %e' -o "$WORK/time" taskset -c 1 "$bin" load -q --rate "$rate" -d"$DURATION" \
    "$@" --json "$json" "$URL" >"${json%.json}.txt"
  row "$label" "$rate" "$json" "$WORK/time"
}

k6_run() {
  local rate=$1 summary="$OUT/k6-$1.json"
  cat >"$WORK/open.js" <<'JS'
import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  scenarios: {
    open: {
      executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
      duration: __ENV.DURATION, preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS),
    },
  },
  summaryTrendStats: ['med', 'p(99)', 'max'],
};
export default function () { http.get(__ENV.URL); }
export function handleSummary(data) { return { [__ENV.SUMMARY]: JSON.stringify(data) }; }
JS
  /usr/bin/time -f '%U %S %e' -o "$WORK/time" taskset -c 1 "$K6" run -q --no-usage-report \
    -e RATE="$rate" -e DURATION="$DURATION" -e VUS="$K6_VUS" -e URL="$URL" -e SUMMARY="$summary" \
    "$WORK/open.js" >"$OUT/k6-$rate.txt" 2>&1
  row "k6 $("$K6" version | awk '{print $2}') (${K6_VUS} VUs)" "$rate" "$summary" "$WORK/time"
}

echo "load average before: $(load_average)"
echo "| generator | rate/s | corrected p50 | corrected p99 | uncorrected p50 | uncorrected p99 | lateness p50 | lateness p99 | lateness max | achieved/s | unsent | requests | CPU s | CPU µs/req | CPU | note |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for rate in $RATES; do
  [[ -n $SLUICE_BEFORE ]] && sluice_run before "$SLUICE_BEFORE" "$rate"
  sluice_run sluice "$SLUICE" "$rate"
done
for rate in $H2_RATES; do
  [[ -n $SLUICE_BEFORE ]] && sluice_run "before h2" "$SLUICE_BEFORE" "$rate" --h2 -c16 -m4
  sluice_run "sluice h2" "$SLUICE" "$rate" --h2 -c16 -m4
done
for rate in $CPU_RATES; do
  [[ -n $SLUICE_BEFORE ]] && sluice_run before "$SLUICE_BEFORE" "$rate"
  sluice_run sluice "$SLUICE" "$rate"
done
if [[ -x $K6 ]]; then
  sluice_run sluice "$SLUICE" "$K6_RATE"
  k6_run "$K6_RATE"
else
  echo "k6 not found (go install go.k6.io/k6@v1.8.1): no k6 row" >&2
fi
echo "load average after: $(load_average)"
