#!/usr/bin/env python3
"""Score the simulator of this build against measurements kept from earlier fidelity runs.

Usage: scripts/rescore-fidelity.py [--build DIR] [--plans] [--refit] DIR [DIR ...]

Each DIR is a folder of plots/measurements/ that keeps runs with the calibration they ran with:
  roundN-cluster.json with roundN-unseen-{deep,wide,long}.json  (bench/fidelity_bench --unseen
      --out's fidelity.json of each model) and/or roundN-validate-3d.json (`osdp validate
      --json`), as scripts/fidelity-rounds.sh's rounds;
  cluster.json with runN.json  (`osdp validate --json` runs of one calibration).
Nothing is measured: `fidelity_bench --unseen --simulate-only` and `osdp validate --against`
simulate the same plans again with this build, with each run's calibration, and each plan is
set against the measurement kept for it, beside the simulation kept with it. So a change to the
simulator is scored against every kept run, plan by plan and paired, in seconds instead of new
rounds of minutes each (whose run-to-run spread is as large as most changes' effect).

--refit scores a change to the compute laws' fit instead: each run's calibration is fitted
again by this build (`osdp calibrate --refit`) from the report kept beside it
(roundN-calibration-report.json, or calibration-report.json beside cluster.json: what
`osdp calibrate --report` wrote), and runs without one are left out (and counted).

Prints a line per run and totals per kind of run and over all: median and largest |time error|,
and the plans whose exposed communication is within 30 % or 5 ms of the measured (the
validator's target), for this build and for the kept simulation; then in how many plan-runs the
two simulations differ. --plans adds a row per plan. Exit 0, or 2 on a folder without a kept run
or a file that is not what it should be.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def run_json(command):
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        fail(f"{' '.join(command)}: exit {result.returncode}\n{result.stderr.strip()}")
    return json.loads(result.stdout)


def kept_runs(directory):
    """[(kind, label, cluster, files)]: kind "unseen" ({model: path}) or "validate" (a path)."""
    runs = []
    names = sorted(os.listdir(directory))
    for name in names:
        if name.startswith("round") and name.endswith("-cluster.json"):
            label = name[: -len("-cluster.json")]
            cluster = os.path.join(directory, name)
            unseen = {m: os.path.join(directory, f"{label}-unseen-{m}.json") for m in MODELS}
            present = [path for path in unseen.values() if os.path.isfile(path)]
            if present and len(present) != len(unseen):
                fail(f"{directory}: {label} keeps some of the unseen models' runs, not all three")
            if present:
                runs.append(("unseen", label, cluster, unseen))
            layouts = os.path.join(directory, f"{label}-validate-3d.json")
            if os.path.isfile(layouts):
                runs.append(("validate", f"{label} layouts", cluster, layouts))
    if "cluster.json" in names:
        for name in names:
            if name.startswith("run") and name.endswith(".json"):
                runs.append(("validate", name[: -len(".json")],
                             os.path.join(directory, "cluster.json"), os.path.join(directory, name)))
    if not runs:
        fail(f"{directory}: no kept run (roundN-cluster.json with roundN-unseen-*.json or "
             "roundN-validate-3d.json, or cluster.json with runN.json)")
    return runs


def refitted_cluster(build, cluster, scratch):
    """The kept cluster with its compute laws fitted again from the report beside it (None when
    there is none): `osdp calibrate --refit` of this build, written under `scratch`."""
    directory = os.path.dirname(cluster)
    name = os.path.basename(cluster)
    prefix = name[: -len("cluster.json")]  # "roundN-" or ""
    report = os.path.join(directory, f"{prefix}calibration-report.json")
    if not os.path.isfile(report):
        return None
    out = os.path.join(scratch, f"{len(os.listdir(scratch))}-{name}")
    command = [os.path.join(build, "cli/osdp"), "calibrate", "--refit", report, "--cluster",
               cluster, "--out", out]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        fail(f"{' '.join(command)}: exit {result.returncode}\n{result.stderr.strip()}")
    return out


def row(model, plan, measured_s, measured_exposed_s, now_time_s, now_exposed_s, kept_time_error,
        kept_exposed_s):
    now_time_error = 100 * (now_time_s - measured_s) / measured_s
    return {"model": model, "plan": plan, "measured_exposed_s": measured_exposed_s,
            "now_exposed_s": now_exposed_s, "kept_exposed_s": kept_exposed_s,
            "now_time_error": now_time_error, "kept_time_error": kept_time_error,
            "now_within": within_target(now_exposed_s, measured_exposed_s),
            "kept_within": within_target(kept_exposed_s, measured_exposed_s)}


def unseen_rows(build, cluster, runs):
    simulated = {}
    for scenario in run_json([os.path.join(build, "bench/fidelity_bench"), "--unseen",
                              "--simulate-only", "--cluster", cluster]):
        simulated[scenario["scenario"].removeprefix("local-cpu-")] = scenario["plans"]
    rows = []
    for model, path in runs.items():
        for plan in read_json(path).get("plans", []):
            now = simulated.get(model, {}).get(plan["name"])
            if now is None:
                fail(f"{path}: plan {plan['name']} is not one fidelity_bench simulates")
            rows.append(row(model, plan["name"], plan["measured_iteration_time_s"],
                            plan["measured_exposed_communication_s"],
                            now["simulated_iteration_time_s"],
                            now["simulated_exposed_communication_s"],
                            plan["time_error_percent"], plan["simulated_exposed_communication_s"]))
    return rows


def validate_rows(build, cluster, path):
    kept = read_json(path)
    if "scenario" not in kept or "plans" not in kept:
        fail(f"{path}: not the JSON of `osdp validate --json` (no scenario or plans)")
    scenario = os.path.join(ROOT, "scenarios", kept["scenario"] + ".json")
    now = run_json([os.path.join(build, "cli/osdp"), "validate", scenario, "--cluster", cluster,
                    "--against", path, "--json"])
    rows = []
    for was, plan in zip(kept["plans"], now["plans"]):
        rows.append(row("", plan["name"], plan["measured_iteration_time_s"],
                        plan["measured_exposed_communication_s"],
                        plan["simulated_iteration_time_s"],
                        plan["simulated_exposed_communication_s"], was["time_error_percent"],
                        was["simulated_exposed_communication_s"]))
    return rows, kept["scenario"]


def describe(label, rows):
    figures = []
    for which in ("now", "kept"):
        errors = [abs(r[which + "_time_error"]) for r in rows]
        figures.append((statistics.median(errors), max(errors),
                        sum(r[which + "_within"] for r in rows)))
    (now_median, now_max, now_within), (kept_median, kept_max, kept_within) = figures
    return (f"{label:<52} median |time error| {now_median:4.1f} % (max {now_max:4.1f} %), "
            f"exposed within target {now_within:3d} of {len(rows)}; kept simulation "
            f"{kept_median:4.1f} % (max {kept_max:4.1f} %), {kept_within} of {len(rows)}")


def print_plans(rows):
    for r in rows:
        print(f"    {r['model']:<5} {r['plan']:<22} time {r['now_time_error']:+6.1f} % "
              f"(kept {r['kept_time_error']:+6.1f}), exposed measured "
              f"{1e3 * r['measured_exposed_s']:6.1f} ms, simulated {1e3 * r['now_exposed_s']:6.1f} "
              f"(kept {1e3 * r['kept_exposed_s']:6.1f})"
              f"{'' if r['now_within'] else '  outside the target'}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: scripts/rescore-fidelity.py plots/measurements/*2026-12-06*")
    parser.add_argument("--build", default=os.path.join(ROOT, "build/release"),
                        help="the build whose bench/fidelity_bench and cli/osdp simulate "
                             "(default: build/release)")
    parser.add_argument("--plans", action="store_true", help="a row per plan as well")
    parser.add_argument("--refit", action="store_true",
                        help="fit each run's compute laws again from its kept calibration "
                             "report (runs without one are left out)")
    parser.add_argument("directories", nargs="+", metavar="DIR")
    arguments = parser.parse_args()
    for program in ("bench/fidelity_bench", "cli/osdp"):
        if not os.access(os.path.join(arguments.build, program), os.X_OK):
            fail(f"{os.path.join(arguments.build, program)}: not built (build it, or give --build)")

    by_kind = {}
    left_out = 0
    # The refitted clusters; removed on every exit, fail()'s included.
    with tempfile.TemporaryDirectory(prefix="rescore-fidelity-") as scratch:
        for directory in arguments.directories:
            if not os.path.isdir(directory):
                fail(f"{directory}: not a directory")
            for kind, label, cluster, files in kept_runs(directory):
                if arguments.refit:
                    cluster = refitted_cluster(arguments.build, cluster, scratch)
                    if cluster is None:
                        left_out += 1
                        continue
                if kind == "unseen":
                    rows = unseen_rows(arguments.build, cluster, files)
                    total = "unseen models, 2 ranks"
                else:
                    rows, scenario = validate_rows(arguments.build, cluster, files)
                    total = f"osdp validate {scenario}"
                print(describe(f"{os.path.basename(os.path.normpath(directory))} {label}", rows))
                if arguments.plans:
                    print_plans(rows)
                by_kind.setdefault(total, []).extend(rows)
    if arguments.refit:
        print(f"--refit: {left_out} runs left out (no calibration report kept beside them)")
        if not by_kind:
            fail("--refit: no kept run has a calibration report (rounds kept since 2026-12-08 "
                 "by scripts/fidelity-rounds.sh have one)")
    every_row = []
    for total, rows in by_kind.items():
        print(describe(f"all {total} ({len(rows)} plan-runs)", rows))
        every_row += rows
    if len(by_kind) > 1:
        print(describe(f"all ({len(every_row)} plan-runs)", every_row))
    changed = sum(abs(r["now_time_error"] - r["kept_time_error"]) > 0.05
                  or abs(r["now_exposed_s"] - r["kept_exposed_s"]) > 5e-5 for r in every_row)
    print(f"this build's simulation differs from the kept one in {changed} of {len(every_row)} "
          "plan-runs (time error by more than 0.05 points or exposed communication by 0.05 ms)")


if __name__ == "__main__":
    main()
