#!/usr/bin/env python3
"""plots/waits.py sums each rank's compute waits per collective, one column per trace and rank,
and its total row is the rank's exposed communication; bad input exits 2.
Usage: check_waits_table.py PLOTS_DIR WORK_DIR"""
import csv
import json
import os
import subprocess
import sys

plots, work = sys.argv[1], sys.argv[2]
script = os.path.join(plots, "waits.py")


def wait(rank, collective, start_us, duration_us):
    return {"ph": "X", "cat": "wait", "name": "wait", "pid": rank, "tid": 2, "ts": start_us,
            "dur": duration_us, "args": {"waited_s": duration_us / 1e6, "for": collective}}


measured = [wait(0, "all-gather embedding", 0, 1000), wait(0, "all-gather embedding", 5000, 500),
            wait(1, "reduce-scatter head", 9000, 2500),
            {"ph": "X", "cat": "compute", "name": "embedding forward", "pid": 0, "tid": 0,
             "ts": 1000, "dur": 4000, "args": {}}]
# A layout's simulated waits name their cause, carry no "for", and its processes are stages.
layout = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "1 x 2 x 1, stage 1"}},
          {"ph": "X", "cat": "wait", "name": "receive", "pid": 1, "tid": 2, "ts": 0, "dur": 3000,
           "args": {"waited_s": 0.003}}]
paths = {}
for name, events in (("measured", measured), ("layout", layout)):
    paths[name] = os.path.join(work, f"waits-{name}.json")
    with open(paths[name], "w") as handle:
        json.dump({"traceEvents": events}, handle)
table = os.path.join(work, "waits-table.csv")
run = subprocess.run([sys.executable, script, paths["measured"], paths["layout"], "--csv", table],
                     capture_output=True, text=True)
assert run.returncode == 0, run.stderr
with open(table) as handle:
    rows = {row[0]: row[1:] for row in csv.reader(handle)}
header = rows.pop("collective")
assert header[0] == "waits-measured rank 0 waited_s", header
# Columns: measured rank 0, measured rank 1, the layout's stage 1 (seconds, count each): each
# trace's own ranks or stages.
assert header[4] == "waits-layout stage 1 waited_s", header
assert rows["all-gather embedding"][:4] == ["0.001500000", "2", "0.000000000", "0"], rows
assert rows["reduce-scatter head"][2:4] == ["0.002500000", "1"], rows
assert rows["receive"][4:6] == ["0.003000000", "1"], rows
assert rows["total"] == ["0.001500000", "2", "0.002500000", "1", "0.003000000", "1"], rows
assert list(rows)[:3] == ["all-gather embedding", "reduce-scatter head", "receive"], list(rows)
assert "1.50 (  2)" in run.stdout and "waits-measured" in run.stdout, run.stdout
assert "stage 1" in run.stdout, run.stdout

# Bad input: not a trace, a missing file, a trace without waits, a bad --ranks.
bad = os.path.join(work, "waits-bad.json")
with open(bad, "w") as handle:
    json.dump({"events": []}, handle)
no_waits = os.path.join(work, "waits-none.json")
with open(no_waits, "w") as handle:
    json.dump({"traceEvents": measured[3:]}, handle)
for arguments in ([bad], [os.path.join(work, "missing.json")], [no_waits],
                  [paths["measured"], "--ranks", "zero"]):
    run = subprocess.run([sys.executable, script] + arguments, capture_output=True, text=True)
    assert run.returncode == 2 and "waits.py: error" in run.stderr, (arguments, run)
print("waits table ok")
