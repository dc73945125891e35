"""Checks the per-stage figures of `osdp validate --json` on tensor and pipeline layouts.

Every layout lists one entry per pipeline stage. Peaks are conserved: a plan's peak (measured:
the highest rank's; simulated: the largest stage's) is the highest of its stages'. A pipeline of
two stages waits for its neighbour on both stages, measured (receives) and simulated (time
outside passes between the first pass and the last); one stage waits for none. The simulated
exposed communication (the least busy stage's wait) is at least every stage's bubble. Times
themselves are not checked: they depend on the machine.
"""
import json
import sys


def main():
    report = json.load(sys.stdin)
    checked = 0
    for plan in report["plans"]:
        name = plan["name"]
        stages = plan["stages"]
        if name == "ddp":
            if stages:
                sys.exit("ddp (no layout) has stage entries")
            continue
        expected = 2 if name.startswith("pp2") else 1
        if len(stages) != expected:
            sys.exit(f"{name}: {len(stages)} stages, expected {expected}")
        for side in ("measured", "simulated"):
            peak = max(stage[f"{side}_peak_memory_bytes"] for stage in stages)
            if peak != plan[f"{side}_peak_memory_bytes"]:
                sys.exit(f"{name}: {side} peak {plan[f'{side}_peak_memory_bytes']} is not its "
                         f"stages' highest ({peak})")
            for stage in stages:
                bubble = stage[f"{side}_bubble_s"]
                if (bubble > 0) != (expected == 2):
                    sys.exit(f"{name} stage {stage['stage']}: {side} bubble {bubble} s")
        widest = max(stage["simulated_bubble_s"] for stage in stages)
        if plan["simulated_exposed_communication_s"] < widest - 1e-9:
            sys.exit(f"{name}: simulated exposed communication "
                     f"{plan['simulated_exposed_communication_s']} s below a stage's bubble {widest} s")
        checked += 1
    print(f"{checked} layouts' stages consistent")


if __name__ == "__main__":
    main()
