"""`osdp validate` with a cluster that has a speed reference: it times the reference probe
before and after the runs and compares a second time with every compute law rescaled by the
factor it found. Only compute scales, so each plan's rescaled simulated time lies between its
simulated time and that time times the factor.
    check_speed_reference.py OSDP SOURCE_DIR WORK_DIR"""
import json
import subprocess
import sys

osdp, source, work = sys.argv[1:4]
cluster = json.load(open(f"{source}/scenarios/local-cpu-cluster.json"))
# The tiny scenario's own GPT as the probe (milliseconds to time), with a calibrated time
# far from what this machine takes, so that the factor is clearly not 1.
cluster["gpu"]["speed_reference"] = {
    "probe": {"layers": 2, "hidden": 64, "heads": 4, "sequence_length": 16, "vocabulary": 128},
    "batch_size": 2, "compute": "20us"}
path = f"{work}/speed-reference-cluster.json"
json.dump(cluster, open(path, "w"))
run = subprocess.run([osdp, "validate", f"{source}/scenarios/local-cpu-tiny.json", "--cluster", path,
                      "--strategies", "ddp,fsdp", "--ranks", "2", "--json"],
                     capture_output=True, text=True, timeout=300)
failures = []
if run.returncode != 0:
    sys.exit(f"FAIL: osdp validate exited {run.returncode}: {run.stderr[-2000:]}")
result = json.loads(run.stdout)
reference = result.get("speed_reference")
if reference is None:
    sys.exit("FAIL: no speed_reference in the JSON")
factor = reference["factor"]
expected = (reference["before_s"] + reference["after_s"]) / (2 * reference["calibrated_s"])
if abs(factor - expected) > 1e-9 * expected:
    failures.append(f"factor {factor} is not the mean timing over the calibrated {expected}")
if not factor > 1.5:
    failures.append(f"factor {factor}: the probe cannot run in 20 us here")
as_calibrated = {p["name"]: p["simulated_iteration_time_s"] for p in result["plans"]}
rescaled = reference["rescaled"]["plans"]
if sorted(p["name"] for p in rescaled) != sorted(as_calibrated):
    failures.append("the rescaled comparison has other plans")
for plan in rescaled:
    before = as_calibrated[plan["name"]]
    after = plan["simulated_iteration_time_s"]
    if not before < after <= before * factor * (1 + 1e-9):
        failures.append(f"{plan['name']}: rescaled {after} s not in ({before}, {before * factor}]")
for failure in failures:
    print("FAIL:", failure)
print(f"factor {factor:.2f}; " + ", ".join(f"{p['name']} {as_calibrated[p['name']]*1e3:.2f} -> "
                                           f"{p['simulated_iteration_time_s']*1e3:.2f} ms" for p in rescaled))
sys.exit(1 if failures else 0)
