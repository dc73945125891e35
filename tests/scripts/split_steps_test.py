#!/usr/bin/env python3
"""scripts/split-steps.py on a made-up kept round: which steps each window keeps, that the
windows share none and together keep all, the figures worked out again from them, and exit 2
on input it cannot split. Usage: split_steps_test.py PROJECT_SOURCE_DIR"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(sys.argv[1], "scripts", "split-steps.py")
STEPS = 27


def rank_steps(seed):
    # Distinct, unordered values, so that a window taking the wrong steps changes a median.
    times = [0.100 + 0.001 * ((7 * i + seed) % STEPS) for i in range(STEPS)]
    waits = [0.002 + 0.0005 * ((11 * i + 3 * seed) % STEPS) for i in range(STEPS)]
    return {"iteration_time_s": statistics.median(times), "iteration_times_s": times,
            "exposed_communication_s": statistics.median(waits),
            "exposed_communication_steps_s": waits, "peer_wait_steps_s": [0.0] * STEPS,
            "peak_memory_bytes": 1e6, "loss": 1.0}


def kept_run(steps_of_plan=STEPS):
    ranks = [rank_steps(1), rank_steps(5)]
    for rank in ranks:
        for key in ("iteration_times_s", "exposed_communication_steps_s", "peer_wait_steps_s"):
            rank[key] = rank[key][:steps_of_plan]
    plan = {"name": "all-dp", "stages": [], "simulated_iteration_time_s": 0.11,
            "simulated_exposed_communication_s": 0.004, "measured_iteration_time_s": 0,
            "measured_exposed_communication_s": 0, "time_error_percent": 0}
    return {"plans": [plan], "measurements": [{"name": "all-dp", "ranks": ranks}]}


def write_round(folder, run):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "round1-cluster.json"), "w") as file:
        json.dump({"name": "made up"}, file)
    for model in ("deep", "wide", "long"):
        with open(os.path.join(folder, f"round1-unseen-{model}.json"), "w") as file:
            json.dump(run, file)


def run_script(*arguments):
    return subprocess.run([sys.executable, SCRIPT, *arguments], capture_output=True, text=True)


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as temp:
        kept = os.path.join(temp, "kept")
        write_round(kept, kept_run())
        out = os.path.join(temp, "out")
        result = run_script(kept, out)
        check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
        original = kept_run()["measurements"][0]["ranks"]
        seen = []
        for window in range(3):
            # 27 steps in 3 rounds of 9: window w keeps steps 3w..3w+2 of every round.
            expected = [9 * r + 3 * window + j for r in range(3) for j in range(3)]
            with open(os.path.join(out, f"window{window + 1}", "round1-unseen-long.json")) as file:
                split = json.load(file)
            ranks = split["measurements"][0]["ranks"]
            for rank, whole in zip(ranks, original):
                check(rank["iteration_times_s"] == [whole["iteration_times_s"][i] for i in expected],
                      f"window {window + 1} keeps steps {expected}")
                check(rank["exposed_communication_s"] ==
                      statistics.median(rank["exposed_communication_steps_s"]),
                      "a rank's median wait is its kept steps' median")
            seen += [ranks[0]["iteration_times_s"][k] for k in range(9)]
            plan = split["plans"][0]
            time_s = statistics.median(max(r["iteration_times_s"][k] for r in ranks)
                                       for k in range(9))
            wait_s = statistics.median(min(r["exposed_communication_steps_s"][k] for r in ranks)
                                       for k in range(9))
            check(plan["measured_iteration_time_s"] == time_s, "the slowest rank's median step")
            check(plan["measured_exposed_communication_s"] == wait_s, "the least rank's wait")
            check(abs(plan["time_error_percent"] - 100 * (0.11 - time_s) / time_s) < 1e-9,
                  "the time error against the kept simulation")
            check(os.path.isfile(os.path.join(out, f"window{window + 1}", "round1-cluster.json")),
                  "the calibration is kept beside each window")
        check(sorted(seen) == sorted(original[0]["iteration_times_s"]),
              "the windows share no step and keep every step")

        uneven = os.path.join(temp, "uneven")
        write_round(uneven, kept_run(26))
        result = run_script(uneven, os.path.join(temp, "out2"))
        check(result.returncode == 2 and "do not split" in result.stderr,
              f"26 steps refused with exit 2: {result.returncode} {result.stderr}")
        result = run_script(os.path.join(temp, "missing"), os.path.join(temp, "out3"))
        check(result.returncode == 2 and "not a directory" in result.stderr,
              "a missing folder refused with exit 2")
        result = run_script("--windows", "0", kept, os.path.join(temp, "out4"))
        check(result.returncode == 2, "--windows 0 refused with exit 2")
    print("split-steps: all checks passed")


if __name__ == "__main__":
    main()
