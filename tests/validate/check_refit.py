"""`osdp calibrate --refit`: a quick calibration's report, fitted again by the same build, gives
back the very cluster it wrote (compared as parsed JSON); a report no law can come from, a missing
--cluster or an option that measures beside --refit exit 2, naming the file and the JSON path,
and write nothing. Usage: check_refit.py OSDP WORK_DIR"""
import json
import os
import subprocess
import sys

osdp, work = sys.argv[1], sys.argv[2]
os.chdir(work)


def run(*arguments):
    return subprocess.run([osdp, *arguments], capture_output=True, text=True)


def check(condition, message):
    if not condition:
        sys.exit(f"FAILED: {message}")


for name in ("refit-report.json", "refit-cluster.json", "refit-again.json", "refit-out.json"):
    if os.path.exists(name):
        os.remove(name)
result = run("calibrate", "--ranks", "2", "--quick", "--report", "refit-report.json", "--out",
             "refit-cluster.json")
check(result.returncode == 0, f"calibrate --quick: exit {result.returncode}: {result.stderr}")
result = run("calibrate", "--refit", "refit-report.json", "--cluster", "refit-cluster.json",
             "--out", "refit-again.json")
check(result.returncode == 0, f"--refit: exit {result.returncode}: {result.stderr}")
check("mlp        backward" in result.stdout, "the table lists each kind's laws")
with open("refit-cluster.json") as kept, open("refit-again.json") as again:
    check(json.load(kept) == json.load(again), "the refitted cluster is the calibrated one")

with open("refit-report.json") as file:
    report = json.load(file)


def refused(edit, path, *extra):
    bad = json.loads(json.dumps(report))
    edit(bad)
    with open("refit-bad.json", "w") as file:
        json.dump(bad, file)
    result = run("calibrate", "--refit", "refit-bad.json", "--cluster", "refit-cluster.json",
                 "--out", "refit-out.json", *extra)
    check(result.returncode == 2, f"{path}: exit {result.returncode}, not 2")
    check(f"refit-bad.json: {path}" in result.stderr, f"the error names {path}: {result.stderr}")
    check(not os.path.exists("refit-out.json"), f"{path}: nothing written")


refused(lambda r: r["operators"][0].update(forward_s=-1.0), "$.operators[0].forward_s")
refused(lambda r: r["operators"][1].update(backward_s=0.0), "$.operators[1].backward_s")
refused(lambda r: r["operators"][0].update(kind="bogus"), "$ (its laws in a cluster)")
refused(lambda r: r.update(operators=[]), "$.operators")
refused(lambda r: r.pop("operators"), "$")
for arguments in (["--refit", "refit-report.json"],
                  ["--refit", "refit-report.json", "--cluster", "refit-cluster.json", "--ranks", "4"],
                  ["--cluster", "refit-cluster.json"]):
    result = run("calibrate", *arguments)
    check(result.returncode == 2, f"{' '.join(arguments)}: exit {result.returncode}, not 2")
print("refit reproduces the cluster and refuses what it cannot fit")
