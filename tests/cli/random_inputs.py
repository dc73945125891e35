#!/usr/bin/env python3
"""Property test of osdp's promise on random inputs: whatever the scenario and the flags, a
command exits 0, 2 (bad input, with one message) or 3 (nothing fits, with the least memory
needed), within its time, and leaves no file behind in its working directory.

    random_inputs.py OSDP BASE_SCENARIO.json [CASES] [SEED]

Each case edits the base scenario at random (a value replaced by another type, a number made
negative, zero, huge or tiny, a key removed or misspelt, a unit string garbled) and picks a
command (plan, explain, sweep, simulate) with random flags, some of them bad. The seed makes the
cases the same on every run; a failing case is printed with its scenario and command line.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

TIME_LIMIT_S = 60

WEIRD_NUMBERS = [0, -1, 1e308, -1e308, 1e-300, 3.5, 2 ** 40, 7]
WEIRD_STRINGS = ["", "abc", "8GiB", "-8GiB", "1e400GiB", "NaN", "inf", "12 parsecs", "\u00e9",
                 "0s", "1us", "10TFLOPS", "dp,zdp", "auto"]
FLAGS = {
    "--memory-limit": ["1GiB", "8GiB", "24GiB", "0GiB", "-1GiB", "1e9TiB", "", "8 GiB", "2MiB",
                       "16MiB"],
    "--modes": ["dp,zdp", "z2", "dp,zdp,z1,z2", "hsdp", "dp,,zdp", "zdq"],
    "--split": ["1", "2", "auto", "3", "0", "x"],
    "--checkpoint": ["on", "off", "auto", "maybe"],
    "--units": ["off", "block", "auto", "all"],
    "--micro-batch": ["1", "2", "0", "100000000"],
    "--precision": ["fp32", "mixed", "bf16", "fp8"],
    "--seq-len": ["64", "0", "1"],
    "--time-limit": ["1s", "10ms", "0s", "1 week"],
}
COMMANDS = ["plan", "explain", "sweep", "simulate"]


def paths(value, prefix=()):
    """Every (path, value) of a JSON document, objects and arrays included."""
    yield prefix, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, prefix + (index,))


def set_at(document, path, value):
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def remove_at(document, path):
    target = document
    for key in path[:-1]:
        target = target[key]
    if isinstance(target, dict):
        del target[path[-1]]


def mutate(rng, scenario):
    document = json.loads(json.dumps(scenario))
    for _ in range(rng.randint(0, 3)):
        leaves = [(p, v) for p, v in paths(document) if p]
        path, value = rng.choice(leaves)
        action = rng.random()
        if action < 0.15 and isinstance(path[-1], str):
            remove_at(document, path)
        elif action < 0.25 and isinstance(path[-1], str):
            parent = document
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1] + "x"] = parent.pop(path[-1])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            set_at(document, path, rng.choice(WEIRD_NUMBERS))
        elif isinstance(value, str):
            set_at(document, path, rng.choice(WEIRD_STRINGS))
        else:
            set_at(document, path, rng.choice(WEIRD_NUMBERS + WEIRD_STRINGS + [None, [], {}]))
    return document


def command_line(rng, scenario_path, out_dir):
    command = rng.choice(COMMANDS)
    args = [command, scenario_path]
    for flag in rng.sample(sorted(FLAGS), rng.randint(0, 3)):
        if command == "sweep" and flag == "--memory-limit":
            continue
        args += [flag, rng.choice(FLAGS[flag])]
    if command == "sweep":
        args += ["--memory-limits", rng.choice(["4GiB:8GiB:4GiB", "8GiB", "1GiB:1e308GiB:1GiB"]),
                 "--no-plot", "--out", os.path.join(out_dir, "sweep")]
    return args


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[4], file=sys.stderr)
        return 2
    osdp, base_path = os.path.abspath(sys.argv[1]), sys.argv[2]
    cases = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 2026
    with open(base_path) as handle:
        base = json.load(handle)
    rng = random.Random(seed)
    failures = []
    counts = {0: 0, 2: 0, 3: 0}
    for case in range(cases):
        with tempfile.TemporaryDirectory() as work:
            scenario = mutate(rng, base)
            scenario_path = os.path.join(work, "scenario.json")
            with open(scenario_path, "w") as handle:
                json.dump(scenario, handle)
            out_dir = os.path.join(work, "outputs")
            args = command_line(rng, scenario_path, out_dir)
            before = set(os.listdir(work))
            try:
                run = subprocess.run([osdp] + args, cwd=work, capture_output=True, text=True,
                                     timeout=TIME_LIMIT_S)
            except subprocess.TimeoutExpired:
                failures.append((case, args, scenario, "ran past %d s" % TIME_LIMIT_S))
                continue
            code = run.returncode
            problem = None
            if code not in (0, 2, 3):
                problem = "exit code %d: %s" % (code, run.stderr[-400:])
            elif code in (2, 3) and not run.stderr.strip():
                problem = "exit code %d without a message" % code
            elif code == 2 and "internal error" in run.stderr:
                problem = "an internal error: " + run.stderr[-400:]
            elif code != 0 and os.path.exists(out_dir) and os.listdir(out_dir):
                problem = "exit code %d left %s" % (code, os.listdir(out_dir))
            left = set(os.listdir(work)) - before - {"outputs"}
            if left:
                problem = "left files in the working directory: %s" % sorted(left)
            if problem:
                failures.append((case, args, scenario, problem))
            else:
                counts[code] += 1
    for case, args, scenario, problem in failures:
        print("case %d: osdp %s\n  scenario: %s\n  %s" % (case, " ".join(args),
                                                         json.dumps(scenario), problem))
    print("%d cases: %d ran (exit 0), %d bad input (exit 2), %d nothing fits (exit 3), "
          "%d broke the promise" % (cases, counts[0], counts[2], counts[3], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
