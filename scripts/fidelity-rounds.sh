#!/usr/bin/env bash
# The validator's fidelity as a new user meets it (issue 11's protocol), in rounds. Each round:
#   1. bench/fidelity_bench against the shipped cluster (scenarios/local-cpu-cluster.json);
#   2. osdp calibrate --ranks 2 --out C.json --report calibration-report.json (a fresh
#      calibration of this machine; the report keeps every probe timing it was fitted on);
#   3. bench/fidelity_bench --cluster C.json;
#   4. osdp validate scenarios/local-cpu.json --cluster C.json --strategies osdp,ddp,fsdp,zero2
#      --ranks 2 --json;
#   5. bench/fidelity_bench --unseen --cluster C.json: the same calibration on three models none
#      of calibrate's probe shapes is (scenarios/local-cpu-{deep,wide,long}.json);
#   6. osdp validate scenarios/local-cpu-3d.json --cluster C.json --json: the tensor, pipeline
#      and 3D + OSDP layouts on real ranks beside the data-parallel plans.
# Every plan is measured for 27 iterations (9 in each of 3 rounds) in every step, not the
# scenarios' 9: the medians of the waits move less from run to run (docs/fidelity.md, "27 steps
# against 9, paired"), for about 1.6 times the time. OSDP_FIDELITY_ITERATIONS=N measures N
# instead (9: the protocol of the rounds kept before 2026-12-08).
# Prints one summary line per step (median and largest |time error|, median |peak memory
# error|, the machine's load) and keeps every output in the directory given (default: a new one
# under /tmp). Run it on a quiet machine: a compiler beside it is measured too.
#   scripts/fidelity-rounds.sh [ROUNDS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
# require_count NAME VALUE WHAT: exit 2 unless VALUE is a whole number from 1.
require_count() {
  case "$2" in
    '' | *[!0-9]* | 0*)
      echo "fidelity-rounds: $1: got '$2': expected a whole number of $3 from 1" >&2
      exit 2
      ;;
  esac
}
rounds="${1:-3}"
require_count ROUNDS "$rounds" rounds
iterations="${OSDP_FIDELITY_ITERATIONS:-27}"
require_count OSDP_FIDELITY_ITERATIONS "$iterations" iterations
out="${2:-$(mktemp -d /tmp/osdp-fidelity.XXXXXX)}"
mkdir -p "$out"
build=build/release
osdp="$build/cli/osdp"
bench="$build/bench/fidelity_bench"
for tool in "$osdp" "$bench"; do
  if [ ! -x "$tool" ]; then
    echo "fidelity-rounds: $tool is missing: build the release preset first" >&2
    exit 2
  fi
done

# One line from a validation JSON: median / largest |time error| and median |memory error|.
summarize() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, statistics, sys
data = json.load(open(sys.argv[1]))
rows = data["plans"]
time = [abs(r["time_error_percent"]) for r in rows]
memory = [abs(r["memory_error_percent"]) for r in rows]
line = (f"median |time error| {statistics.median(time):.1f} % (max {max(time):.1f} %), "
        f"median |peak memory error| {statistics.median(memory):.1f} %, "
        f"ranking {data['concordant_pairs']} of {data['separated_pairs']} separated pairs alike")
# Each plan's exposed-communication target (validate and fidelity_bench JSON alike); a JSON
# from before the target was recorded has none.
within = [r["exposed_within_target"] for r in rows if "exposed_within_target" in r]
if within:
    line += f", exposed communication within 30 % or 5 ms in {sum(within)} of {len(within)}"
# The same less each rank's waits for a late peer (validate/peer_waits), where measured.
split = [r["exposed_without_peer_waits_within_target"] for r in rows
         if "exposed_without_peer_waits_within_target" in r]
if split:
    line += f" ({sum(split)} of {len(split)} less the waits for a late peer)"
if "machine_load" in data:
    load = data["machine_load"]
    line += f", load {load['load_average_before']:.2f}/{load['load_average_after']:.2f}"
if "compute_check" in data:
    check = data["compute_check"]
    line += (f", compute check {check['measured_over_law_before']:.2f}x/"
             f"{check['measured_over_law_after']:.2f}x")
if "speed_reference" in data:
    drift = data["speed_reference"]
    rescaled = [abs(r["time_error_percent"]) for r in drift["rescaled"]["plans"]]
    line += (f"; speed reference {drift['before_s'] / drift['calibrated_s']:.2f}x/"
             f"{drift['after_s'] / drift['calibrated_s']:.2f}x, rescaled: median "
             f"{statistics.median(rescaled):.1f} % (max {max(rescaled):.1f} %)")
print(line)
EOF
}

steps=(--iterations "$iterations")

for round in $(seq 1 "$rounds"); do
  dir="$out/round$round"
  mkdir -p "$dir"
  "$bench" "${steps[@]}" --out "$dir/shipped" > "$dir/shipped.txt" 2>&1 || true
  echo "round $round, shipped cluster, fidelity_bench: $(summarize "$dir/shipped/fidelity.json")"
  grep -h "machine load\|compute alone" "$dir/shipped.txt" | sed 's/^/    /' || true
  "$osdp" calibrate --ranks 2 --out "$dir/C.json" --report "$dir/calibration-report.json" \
    > "$dir/calibrate.txt" 2>&1
  "$bench" "${steps[@]}" --cluster "$dir/C.json" --out "$dir/fresh" > "$dir/fresh.txt" 2>&1 || true
  echo "round $round, fresh calibration, fidelity_bench: $(summarize "$dir/fresh/fidelity.json")"
  grep -h "machine load\|compute alone\|speed reference" "$dir/fresh.txt" | sed 's/^/    /' || true
  "$osdp" validate scenarios/local-cpu.json --cluster "$dir/C.json" \
    --strategies osdp,ddp,fsdp,zero2 --ranks 2 "${steps[@]}" --json > "$dir/validate.json"
  echo "round $round, fresh calibration, validate: $(summarize "$dir/validate.json")"
  "$bench" "${steps[@]}" --unseen --cluster "$dir/C.json" --out "$dir/unseen" > "$dir/unseen.txt" 2>&1 || true
  for model in deep wide long; do
    echo "round $round, fresh calibration, unseen $model: $(summarize "$dir/unseen/local-cpu-$model/fidelity.json")"
  done
  grep -h "^  all " "$dir/unseen.txt" | sed "s/^  all */round $round, unseen models pooled: /" || true
  grep -h "^  all, speed-rescaled" "$dir/unseen.txt" |
    sed "s/^  all, speed-rescaled */round $round, unseen models pooled, speed-rescaled: /" || true
  "$osdp" validate scenarios/local-cpu-3d.json --cluster "$dir/C.json" "${steps[@]}" --json \
    > "$dir/validate-3d.json"
  echo "round $round, fresh calibration, validate 3D layouts: $(summarize "$dir/validate-3d.json")"
done
echo "outputs in $out"
