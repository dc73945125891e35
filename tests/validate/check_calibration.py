"""Checks what `osdp calibrate --json` wrote: the cluster's collectives are the fit of the
points as a training step issues them (each point's mean inside its middle half, the
back-to-back figure beside it, rank 0's mean between the last-coming rank's and the
first-coming one's), its straggler_slowdown is the compute laws' straggling, and its
speed reference is the main probe's compute at one batch size, as the laws' points timed it."""
import json
import sys

document = json.load(open(sys.argv[1]))
cluster, report = document["cluster"], document["report"]
failures = []
for point in report["collectives"]:
    name = f"{point['collective']} {point['bytes']:.0f} B"
    if not point["time_q1_s"] <= point["time_q3_s"]:
        failures.append(f"{name}: first quartile above the third")
    if not point["time_s"] > 0 or not point["back_to_back_time_s"] > 0:
        failures.append(f"{name}: a time not above zero")
    if not 0 < point["cpu_fraction"] <= 1.5:
        failures.append(f"{name}: CPU busy {point['cpu_fraction']:.2f} of a core (not the transport's alone)")
    # The same calls on every rank: the last to come took no longer than rank 0 (time_s), the
    # first no shorter (the spread is the longest less the shortest, call by call).
    last, spread = point["last_arrival_time_s"], point["arrival_spread_s"]
    tolerance = 1e-9 * point["time_s"]
    if not (0 < last <= point["time_s"] + tolerance and spread >= 0
            and point["time_s"] <= last + spread + tolerance):
        failures.append(f"{name}: last to come {last}, spread {spread} against rank 0's {point['time_s']}")
runs = report["compute_straggling_runs"]
if not runs or min(runs) < 1:
    failures.append(f"straggling runs {runs}: expected at least one, each >= 1")
ordered = sorted(runs)
middle = len(ordered) // 2
expected = ordered[middle] if len(ordered) % 2 else 0.5 * (ordered[middle - 1] + ordered[middle])
if abs(report["compute_straggler_slowdown"] - expected) > 1e-12:
    failures.append("compute_straggler_slowdown is not the median of its runs")
written = cluster["gpu"].get("straggler_slowdown", 1.0)
if abs(written - report["compute_straggler_slowdown"]) > 1e-12:
    failures.append(f"cluster straggler_slowdown {written} != report {report['compute_straggler_slowdown']}")
# The fitted laws take each point's step time: the issued mean over its ring steps.
for point in report["collectives"]:
    steps = 2 if point["collective"] == "all-reduce" else 1
    if abs(point["step_time_s"] * steps - point["time_s"]) > 1e-12 * point["time_s"]:
        failures.append(f"{point['collective']}: step time is not the issued mean over its steps")
# Ranks on this machine's cores: the cores, and the scheduler's tick (the coarse clock's
# resolution: 1 to 10 ms on Linux, HZ from 1000 to 100).
host = cluster.get("host", {})
if not host.get("ranks_on_cores") or host.get("cores", 0) < 1:
    failures.append(f"host {host}: expected ranks_on_cores and the cores")
if not 0.5e-3 <= host.get("scheduler_tick", 0) <= 10.5e-3:
    failures.append(f"host scheduler_tick {host.get('scheduler_tick')}: expected 1-10 ms")
reference = cluster["gpu"].get("speed_reference")
if reference is None:
    failures.append("no gpu.speed_reference in the cluster")
else:
    probe = reference["probe"]
    label = f"{probe['layers']} x {probe['hidden']}, s {probe['sequence_length']}, v {probe['vocabulary']}"
    points = [p for p in report["operators"]
              if p["probe"] == label and p["batch_size"] == reference["batch_size"]]
    total = sum(p["forward_s"] + p["backward_s"] for p in points)
    if not points or abs(total - reference["compute"]) > 1e-9 * total:
        failures.append(f"speed reference {reference['compute']} s != the {len(points)} points of "
                        f"{label} at batch {reference['batch_size']} ({total} s)")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
