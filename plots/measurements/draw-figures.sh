#!/usr/bin/env bash
# Draws the committed figures of measured runs (plots/figures/*-spread.png) from the runs kept
# here, with plots/validation_spread.py. Usage, from anywhere: draw-figures.sh [OUTPUT_DIR]
# (default: plots/figures). Exit code 2 on bad input, 3 without matplotlib, as the plot's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/plots/figures}"
mkdir -p "$out"
plot() { python3 "$root/plots/validation_spread.py" "$@"; }

# 4 ranks on the 2 cores: three runs on each of three calibrations (2026-11-29 evening).
runs="$root/plots/measurements/validate-4ranks-2026-11-29"
args=()
for calibration in 2015 2034 2045; do
  case $calibration in
    2015) label="20:15, the model before the step straggling" ;;
    2034) label="20:34 (shipped since)" ;;
    2045) label="20:45" ;;
  esac
  for run in 1 2 3; do args+=("$label=$runs/calibration-$calibration-run$run.json"); done
done
plot --title "local-cpu-3d-4ranks.json, 4 ranks on 2 cores: 9 runs of osdp validate on 3 fresh calibrations (2026-11-29)" \
  "$out/validate-4ranks-spread.png" "${args[@]}"

# 2 ranks: three rounds of scripts/fidelity-rounds.sh (2026-11-29 15:00-15:12).
rounds="$root/plots/measurements/fidelity-2ranks-2026-11-29"
args=()
for round in 1 2 3; do args+=("round $round=$rounds/round$round-validate-3d.json"); done
plot --title "local-cpu-3d.json, 2 ranks: 3 rounds, each on a fresh calibration (2026-11-29 15:00-15:12)" \
  "$out/validate-3d-2ranks-spread.png" "${args[@]}"
args=()
for round in 1 2 3; do
  for model in deep wide long; do args+=("round $round=$rounds/round$round-unseen-$model.json#$model"); done
done
plot --title "Three models the calibration never saw, 2 ranks: 3 rounds, each on a fresh calibration (2026-11-29 15:00-15:12)" \
  "$out/unseen-2ranks-spread.png" "${args[@]}"
# Every kept round, as recorded then (each with the simulator of its day): the 2-rank rounds'
# unseen models (pooled per round) and 3D layouts, and the 4-rank runs.
history() { python3 "$root/plots/fidelity_history.py" "$@"; }
# In the order measured (a glob would put 12-06-afternoon before 12-06-noon).
days2="11-29 11-30 12-06 12-06-noon 12-06-afternoon 12-06-evening 12-07 12-07-evening 12-08-27steps 12-08-night"
days4="11-29 12-06 12-06-noon 12-06-afternoon 12-07 12-07-evening 12-08-27steps"
args=()
# add_rounds SETTING KIND: each kept 2-rank round's roundN-KIND*.json, under SETTING@DAY rN.
add_rounds() {
  for day in $days2; do
    for file in "$root/plots/measurements/fidelity-2ranks-2026-$day/"round*-"$2"*.json; do
      [ -e "$file" ] || continue
      round="${file##*/}"; round="${round%%-$2*}"
      args+=("$1@$day ${round/round/r}=$file")
    done
  done
}
add_rounds "2 ranks: three unseen models" unseen-
add_rounds "2 ranks: 3D layouts" validate-3d
for day in $days4; do
  kept="$root/plots/measurements/validate-4ranks-2026-$day/"
  for file in "$kept"*run*.json; do
    run="${file##*/}"; run="${run%.json}"; run="${run/calibration-/}"
    args+=("4 ranks on 2 cores@$day ${run}=$file")
  done
done
history "$out/fidelity-history.png" "${args[@]}"
echo "figures written to $out"
