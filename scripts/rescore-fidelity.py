#!/usr/bin/env python3
"""Score the simulator of this build against measurements kept from earlier fidelity runs.

Usage: scripts/rescore-fidelity.py [--bench PATH] [--plans] DIR [DIR ...]

Each DIR is a folder of plots/measurements/ that keeps, for each round N, the calibration the
round ran with (roundN-cluster.json) and the three unseen models' fidelity.json
(roundN-unseen-{deep,wide,long}.json, as bench/fidelity_bench --unseen --out wrote them).
Nothing is measured: `fidelity_bench --unseen --simulate-only --cluster roundN-cluster.json`
simulates the same six plans again with this build, and each is set against the measurement kept
for it, beside the simulation kept with it. So a change to the simulator is scored against
every kept round, plan by plan and paired, in seconds instead of new rounds of minutes each
(whose run-to-run spread is as large as most changes' effect).

Prints a line per round and one over all of them: median and largest |time error|, and the
plans whose exposed communication is within 30 % or 5 ms of the measured (the validator's
target), for this build and for the kept simulation; then in how many plan-runs the two
simulations differ. --plans adds a row per plan. Exit 0, or 2
on a folder without a kept round or a file that is not what it should be.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MODELS = ("deep", "wide", "long")


def fail(message):
    print(f"rescore-fidelity: {message}", file=sys.stderr)
    sys.exit(2)


def within_target(simulated_s, measured_s):
    """The validator's exposed-communication target: within 30 % or 5 ms of the measured."""
    return abs(simulated_s - measured_s) <= max(0.3 * measured_s, 0.005)


def read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        fail(f"{path}: {error}")


def kept_rounds(directory):
    """[(round label, cluster path, {model: fidelity.json path})] in round order."""
    rounds = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("round") and name.endswith("-cluster.json")):
            continue
        label = name[: -len("-cluster.json")]
        runs = {m: os.path.join(directory, f"{label}-unseen-{m}.json") for m in MODELS}
        missing = [path for path in runs.values() if not os.path.isfile(path)]
        if missing:
            fail(f"{directory}: {label} has a cluster but not {', '.join(missing)}")
        rounds.append((label, os.path.join(directory, name), runs))
    if not rounds:
        fail(f"{directory}: no roundN-cluster.json with its roundN-unseen-*.json")
    return rounds


def simulate(bench, cluster):
    """{model: {plan: simulated figures}} from fidelity_bench --simulate-only."""
    result = subprocess.run([bench, "--unseen", "--simulate-only", "--cluster", cluster],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        fail(f"{bench} --simulate-only --cluster {cluster}: exit {result.returncode}\n"
             f"{result.stderr.strip()}")
    simulated = {}
    for scenario in json.loads(result.stdout):
        simulated[scenario["scenario"].removeprefix("local-cpu-")] = scenario["plans"]
    return simulated


def score(rows):
    """Median and largest |time error| (%), exposed within target, for (now, kept) each."""
    figures = []
    for which in ("now", "kept"):
        errors = [abs(row[which + "_time_error"]) for row in rows]
        within = sum(row[which + "_within"] for row in rows)
        figures.append((statistics.median(errors), max(errors), within))
    return figures


def describe(label, rows):
    (now_median, now_max, now_within), (kept_median, kept_max, kept_within) = score(rows)
    return (f"{label:<44} median |time error| {now_median:4.1f} % (max {now_max:4.1f} %), exposed "
            f"within target {now_within:3d} of {len(rows)}; kept simulation {kept_median:4.1f} % "
            f"(max {kept_max:4.1f} %), {kept_within} of {len(rows)}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: scripts/rescore-fidelity.py plots/measurements/fidelity-2ranks-2026-12-06*")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--bench", default=os.path.join(root, "build/release/bench/fidelity_bench"),
                        help="the fidelity_bench to simulate with (default: the release build's)")
    parser.add_argument("--plans", action="store_true", help="a row per plan as well")
    parser.add_argument("directories", nargs="+", metavar="DIR")
    arguments = parser.parse_args()
    if not os.access(arguments.bench, os.X_OK):
        fail(f"{arguments.bench}: not an executable fidelity_bench (build it, or give --bench)")

    every_row = []
    for directory in arguments.directories:
        if not os.path.isdir(directory):
            fail(f"{directory}: not a directory")
        for label, cluster, runs in kept_rounds(directory):
            simulated = simulate(arguments.bench, cluster)
            rows = []
            for model, path in runs.items():
                for plan in read_json(path).get("plans", []):
                    now = simulated.get(model, {}).get(plan["name"])
                    if now is None:
                        fail(f"{path}: plan {plan['name']} is not one fidelity_bench simulates")
                    measured_s = plan["measured_iteration_time_s"]
                    measured_exposed_s = plan["measured_exposed_communication_s"]
                    rows.append({
                        "model": model, "plan": plan["name"],
                        "measured_exposed_s": measured_exposed_s,
                        "now_exposed_s": now["simulated_exposed_communication_s"],
                        "kept_exposed_s": plan["simulated_exposed_communication_s"],
                        "now_time_error": 100 * (now["simulated_iteration_time_s"] - measured_s)
                        / measured_s,
                        "kept_time_error": plan["time_error_percent"],
                        "now_within": within_target(now["simulated_exposed_communication_s"],
                                                    measured_exposed_s),
                        "kept_within": within_target(plan["simulated_exposed_communication_s"],
                                                     measured_exposed_s),
                    })
            name = f"{os.path.basename(os.path.normpath(directory))} {label}"
            print(describe(name, rows))
            if arguments.plans:
                for row in rows:
                    print(f"    {row['model']:<5} {row['plan']:<13} time {row['now_time_error']:+6.1f} % "
                          f"(kept {row['kept_time_error']:+6.1f}), exposed measured "
                          f"{1e3 * row['measured_exposed_s']:6.1f} ms, simulated "
                          f"{1e3 * row['now_exposed_s']:6.1f} (kept {1e3 * row['kept_exposed_s']:6.1f})"
                          f"{'' if row['now_within'] else '  outside the target'}")
            every_row += rows
    print(describe(f"all ({len(every_row)} plan-runs)", every_row))
    changed = sum(abs(row["now_time_error"] - row["kept_time_error"]) > 0.05
                  or abs(row["now_exposed_s"] - row["kept_exposed_s"]) > 5e-5 for row in every_row)
    print(f"this build's simulation differs from the kept one in {changed} of {len(every_row)} "
          "plan-runs (time error by more than 0.05 points or exposed communication by 0.05 ms)")


if __name__ == "__main__":
    main()
