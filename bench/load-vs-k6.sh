#!/usr/bin/env bash
# The same scenario with k6 and with `sluice load` against
# `sluice serve petstore --workers 1` (issue 49): a fixed rate
# (k6's constant-arrival-rate, `sluice load --rate`) and a ramp (k6's
# ramping-arrival-rate, `sluice load --rate-stage`), side by side: the
# rate achieved in each stage, the requests dropped (k6's
# dropped_iterations) or never sent (sluice's unsent), p50 and p99, and
# the generator's CPU per request.
#
#   bench/load-vs-k6.sh                 # RATE=4000 for 20s; ramp 500 -> 4000 over 15s, hold 15s
#   RATE=8000 RAMP_TO=8000 bench/load-vs-k6.sh
#
# Needs GNU time, taskset, python3 and k6 (`go install go.k6.io/k6@latest`;
# on PATH or in ~/go/bin). Target on CPU 0, the generator on CPU 1. k6's
# latency is its http_req_duration (from its own send: it has no corrected
# figure); sluice's is from each request's intended send time
# (coordinated omission corrected) and its uncorrected one is beside it.
# CPU is GNU time's user + system of the generator's whole process.
set -euo pipefail

RATE=${RATE:-4000}
DURATION=${DURATION:-20s}
RAMP_FROM=${RAMP_FROM:-500}
RAMP_TO=${RAMP_TO:-4000}
RAMP_UP=${RAMP_UP:-15s}
HOLD=${HOLD:-15s}
K6_VUS=${K6_VUS:-400}
CONNECTIONS=${CONNECTIONS:-64}
PORT=${PORT:-18094}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/load-vs-k6}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
K6=${K6:-$(command -v k6 || echo "$HOME/go/bin/k6")}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
URL="http://127.0.0.1:$PORT/v1/pets"

[[ -x $K6 ]] || { echo "k6 not found: go install go.k6.io/k6@latest" >&2; exit 2; }
# The target is the "backend" the setup stops on exit.
proxy_bench_setup taskset /usr/bin/time python3
taskset -c 0 "$SLUICE" serve petstore --workers 1 --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
BACKEND_PID=$!
wait_port "$PORT"
# The target's first seconds are not measured.
taskset -c 1 "$SLUICE" load -q --rate 2000 -d2s -c"$CONNECTIONS" "$URL" >/dev/null

cat >"$WORK/k6.js" <<'JS'
import http from 'k6/http';
import exec from 'k6/execution';
const fixed = __ENV.MODE === 'fixed';
// Each request tagged with its stage (by the time since the start), so
// that the summary counts each stage's requests.
const ends = fixed ? [Number(__ENV.SECONDS)] : [Number(__ENV.UP_S), Number(__ENV.UP_S) + Number(__ENV.HOLD_S)];
export const options = {
  discardResponseBodies: true,
  scenarios: {
    load: fixed
      ? { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
          duration: __ENV.DURATION, preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS) }
      : { executor: 'ramping-arrival-rate', startRate: Number(__ENV.FROM), timeUnit: '1s',
          preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS),
          stages: [{ duration: __ENV.UP, target: Number(__ENV.TO) }, { duration: __ENV.HOLD, target: Number(__ENV.TO) }] },
  },
  summaryTrendStats: ['med', 'p(99)', 'max'],
  // Thresholds that always hold make the summary count each stage.
  thresholds: Object.fromEntries(ends.map((_, i) => [`http_reqs{stage:${i + 1}}`, ['count>=0']])),
};
export default function () {
  const at = (Date.now() - exec.scenario.startTime) / 1000;
  const stage = ends.findIndex((end) => at < end) + 1 || ends.length;
  http.get(__ENV.URL, { tags: { stage: String(stage) } });
}
export function handleSummary(data) { return { [__ENV.SUMMARY]: JSON.stringify(data) }; }
JS

seconds() { python3 -c "import sys,re; t=sys.argv[1]; print(float(re.sub('s$','',t)))" "$1"; }

# row LABEL MODE JSON TIMES: one table row per stage.
row() {
  python3 - "$@" <<'PY'
import json, sys
label, mode, path, times = sys.argv[1:5]
user, system, elapsed = map(float, open(times).read().split()[-3:])
data = json.load(open(path))
cpu = user + system
rows = []
if "metrics" in data:  # k6
    m = data["metrics"]
    requests = m["http_reqs"]["values"]["count"]
    dropped = m.get("dropped_iterations", {}).get("values", {}).get("count", 0)
    d = m["http_req_duration"]["values"]
    stages = sorted(k for k in m if k.startswith("http_reqs{stage:"))
    for key in stages:
        rows.append((key.split(":")[1].rstrip("}"), m[key]["values"]["count"]))
    p50, p99 = d["med"] * 1000, d["p(99)"] * 1000
    lost = f"{dropped:,.0f} dropped"
    note = "from its send"
else:
    requests = data["requests"]
    p = lambda s, q: next(x["value_us"] for x in s["percentiles"] if x["percentile"] == q)
    p50, p99 = p(data["latency"], 50.0), p(data["latency"], 99.0)
    u = data["uncorrected_latency"]
    note = f"corrected; uncorrected p50 {p(u, 50.0):,.0f}, p99 {p(u, 99.0):,.0f}"
    lost = f"{data['schedule']['unsent']:,} unsent"
    if data["stages"]:
        rows = [(str(s["stage"]), s["requests"]) for s in data["stages"]]
    else:
        rows = [("1", requests)]
durations = [float(x) for x in sys.argv[5].split(",")]
targets = sys.argv[6].split(",")
for (stage, count), seconds, target in zip(rows, durations, targets):
    print(f"| {label} | {mode} | {stage} ({target}) | {count / seconds:,.0f} | {lost} | {p50:,.0f} | {p99:,.0f} | {requests:,.0f} | {cpu:.2f} | {cpu * 1e6 / max(requests, 1):.1f} | {note} |")
PY
}

sluice_run() {
  local mode=$1 json="$OUT/sluice-$1.json"
  shift
  /usr/bin/time -f '%U %S %e' -o "$WORK/time" taskset -c 1 "$SLUICE" load -q -c"$CONNECTIONS" "$@" \
    --json "$json" "$URL" >"${json%.json}.txt"
  echo "$WORK/time"
}

k6_run() {
  local mode=$1 summary="$OUT/k6-$1.json"
  /usr/bin/time -f '%U %S %e' -o "$WORK/time" taskset -c 1 "$K6" run -q --no-usage-report \
    -e MODE="$mode" -e RATE="$RATE" -e DURATION="$DURATION" -e SECONDS="$(seconds "$DURATION")" \
    -e FROM="$RAMP_FROM" -e TO="$RAMP_TO" -e UP="$RAMP_UP" -e HOLD="$HOLD" \
    -e UP_S="$(seconds "$RAMP_UP")" -e HOLD_S="$(seconds "$HOLD")" \
    -e VUS="$K6_VUS" -e URL="$URL" -e SUMMARY="$summary" "$WORK/k6.js" >"$OUT/k6-$mode.txt" 2>&1 || true
}

K6_LABEL="k6 $("$K6" version | awk '{print $2}') (${K6_VUS} VUs)"
FIXED_S=$(seconds "$DURATION")
RAMP_S="$(seconds "$RAMP_UP"),$(seconds "$HOLD")"
echo "load average before: $(load_average)"
echo "| generator | scenario | stage (target/s) | achieved/s | dropped or unsent | p50 µs | p99 µs | requests | CPU s | CPU µs/req | latency |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
sluice_run fixed --rate "$RATE" -d"$DURATION" >/dev/null
row "sluice load" "fixed $RATE/s" "$OUT/sluice-fixed.json" "$WORK/time" "$FIXED_S" "$RATE"
k6_run fixed
row "$K6_LABEL" "fixed $RATE/s" "$OUT/k6-fixed.json" "$WORK/time" "$FIXED_S" "$RATE"
sluice_run ramp --rate-stage "0s:$RAMP_FROM" --rate-stage "$RAMP_UP:$RAMP_TO" --rate-stage "$HOLD:$RAMP_TO" >/dev/null
row "sluice load" "ramp $RAMP_FROM->$RAMP_TO/s" "$OUT/sluice-ramp.json" "$WORK/time" "$RAMP_S" "$RAMP_FROM->$RAMP_TO,$RAMP_TO"
k6_run ramp
row "$K6_LABEL" "ramp $RAMP_FROM->$RAMP_TO/s" "$OUT/k6-ramp.json" "$WORK/time" "$RAMP_S" "$RAMP_FROM->$RAMP_TO,$RAMP_TO"
echo "load average after: $(load_average)"
