#!/usr/bin/env python3
"""Split kept fidelity runs of many measured steps into the shorter runs they contain.

Usage: scripts/split-steps.py [--rounds R] [--windows K] KEPT_DIR OUT_DIR

KEPT_DIR is a folder of plots/measurements/ as scripts/rescore-fidelity.py reads it (roundN-*
files of scripts/fidelity-rounds.sh, or cluster.json with runN.json), measured at N steps a plan
in R rounds (the plans take turns: steps 1..N/R in the first round, and so on). OUT_DIR/window1
.. OUT_DIR/windowK receive the same files, each keeping N/K of every plan's steps: the j-th
stretch of N/(R K) consecutive steps of every round, as a run of N/K steps in R rounds would have
measured them. Each rank's medians and each plan's measured time and exposed communication
(and its time error) are worked out again from the steps kept; the simulation is left as it was.

So one run at 27 steps gives three runs at 9, measured on the same machine at the same time,
and `scripts/rescore-fidelity.py OUT_DIR/window*` against `... KEPT_DIR` says what the longer
medians change, paired: the same plans, the same calibration, the same minutes. Exit 0, or 2 on
a folder or file that is not what it should be.
"""
import argparse
import json
import os
import shutil
import statistics
import sys


def fail(message):
    print(f"split-steps: {message}", file=sys.stderr)
    sys.exit(2)


def read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        fail(f"{path}: {error}")


def kept_steps(count, rounds, windows, window):
    """The indices window `window` keeps of `count` steps measured in `rounds` rounds."""
    if count % (rounds * windows) != 0:
        return None
    per_round = count // rounds
    stretch = per_round // windows
    return [r * per_round + window * stretch + j for r in range(rounds) for j in range(stretch)]


def split_rank(rank, indices):
    out = dict(rank)
    for key in ("iteration_times_s", "exposed_communication_steps_s", "peer_wait_steps_s"):
        if key in rank:
            out[key] = [rank[key][i] for i in indices]
    if out.get("iteration_times_s"):
        out["iteration_time_s"] = statistics.median(out["iteration_times_s"])
    if out.get("exposed_communication_steps_s"):
        out["exposed_communication_s"] = statistics.median(out["exposed_communication_steps_s"])
    return out


def data_parallel_figures(ranks):
    """Median over steps of the slowest rank's time and of the least rank's wait: the
    validator's figures where every rank runs the same passes (the 2-rank plans' case)."""
    steps = range(len(ranks[0]["iteration_times_s"]))
    time_s = statistics.median(max(r["iteration_times_s"][i] for r in ranks) for i in steps)
    exposed_s = statistics.median(
        min(r["exposed_communication_steps_s"][i] for r in ranks) for i in steps)
    return time_s, exposed_s


def split_file(path, out_path, rounds, windows, window):
    kept = read_json(path)
    measurements = kept.get("measurements")
    if not isinstance(measurements, list) or not measurements:
        fail(f"{path}: no measurements (a JSON of `osdp validate --json` or fidelity_bench)")
    by_name = {}
    for measurement in measurements:
        counts = {len(rank.get("iteration_times_s", [])) for rank in measurement["ranks"]}
        indices = kept_steps(counts.pop(), rounds, windows, window) if len(counts) == 1 else None
        if indices is None:
            fail(f"{path}: plan {measurement['name']}: its ranks' steps do not split alike into "
                 f"{rounds} rounds of {windows} windows")
        measurement["ranks"] = [split_rank(rank, indices) for rank in measurement["ranks"]]
        by_name[measurement["name"]] = measurement
    for plan in kept.get("plans", []):
        measurement = by_name.get(plan["name"])
        if measurement is None:
            fail(f"{path}: plan {plan['name']} has no measurement")
        # A layout's stages wait apart; `osdp validate --against` works its figures out again
        # from the steps, so only the data-parallel plans' are needed here.
        if plan.get("stages"):
            continue
        time_s, exposed_s = data_parallel_figures(measurement["ranks"])
        plan["measured_iteration_time_s"] = time_s
        plan["measured_exposed_communication_s"] = exposed_s
        plan["time_error_percent"] = 100 * (plan["simulated_iteration_time_s"] - time_s) / time_s
    if isinstance(kept.get("validation"), dict) and "iterations" in kept["validation"]:
        kept["validation"]["iterations"] //= windows
    with open(out_path, "w", encoding="utf-8") as file:
        json.dump(kept, file)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds the plans took turns in (default 3, the scenarios')")
    parser.add_argument("--windows", type=int, default=3,
                        help="shorter runs to make of each (default 3: 27 steps -> 3 x 9)")
    parser.add_argument("kept", metavar="KEPT_DIR")
    parser.add_argument("out", metavar="OUT_DIR")
    arguments = parser.parse_args()
    if arguments.rounds < 1 or arguments.windows < 1:
        fail(f"--rounds {arguments.rounds} --windows {arguments.windows}: expected both from 1")
    if not os.path.isdir(arguments.kept):
        fail(f"{arguments.kept}: not a directory")
    names = sorted(os.listdir(arguments.kept))
    clusters = [n for n in names if n == "cluster.json" or n.endswith("-cluster.json")]
    runs = [n for n in names if n.endswith(".json") and n not in clusters
            and ("-unseen-" in n or n.endswith("-validate-3d.json")
                 or (n.startswith("run") and "cluster.json" in names))]
    if not clusters or not runs:
        fail(f"{arguments.kept}: no kept run (see scripts/rescore-fidelity.py)")
    for window in range(arguments.windows):
        out = os.path.join(arguments.out, f"window{window + 1}")
        os.makedirs(out, exist_ok=True)
        for name in clusters:
            shutil.copyfile(os.path.join(arguments.kept, name), os.path.join(out, name))
        for name in runs:
            split_file(os.path.join(arguments.kept, name), os.path.join(out, name),
                       arguments.rounds, arguments.windows, window)
    print(f"split-steps: {len(runs)} runs into {arguments.windows} windows under {arguments.out}")


if __name__ == "__main__":
    main()
