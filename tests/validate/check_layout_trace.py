"""Checks the traces `osdp validate --out DIR --layouts pp2:1f1b:m2` writes for the layout.

The measured trace (traces/pp2-1f1b-m2.measured.json) has each rank's passes in 1F1B's order on
two stages (stage 0: F0 F1 B0 B1, stage 1: F0 B0 F1 B1), one after another, then its optimizer
step; all ranks are on one time base, so stage 1's first forward starts after stage 0's has
ended (it needs its output) and stage 0's first backward after stage 1's (it needs its gradient).
Stage 1's wait for that output is on its "compute waits" track, a "receive" ending as its first
forward starts.
The simulated trace (traces/pp2-1f1b-m2.simulated.json) holds the 3D model's timeline. The
fsdp plan's measured trace has its compute waits, each rank's on a "compute waits" track.
"""
import json
import sys


def main():
    out = sys.argv[1]
    name = "pp2-1f1b-m2"
    measured = json.load(open(f"{out}/traces/{name}.measured.json"))["traceEvents"]
    compute = {}
    for event in measured:
        if event.get("ph") == "X" and event.get("cat") == "compute":
            compute.setdefault(event["pid"], []).append(event)
    if sorted(compute) != [0, 1]:
        sys.exit(f"compute events of ranks {sorted(compute)}, expected 0 and 1")
    expected = {0: ["F0", "F1", "B0", "B1", "optimizer step"],
                1: ["F0", "B0", "F1", "B1", "optimizer step"]}
    spans = {}
    for rank, events in compute.items():
        events.sort(key=lambda event: event["ts"])
        names = [event["name"] for event in events]
        if names != expected[rank]:
            sys.exit(f"rank {rank} ran {names}, expected {expected[rank]}")
        for before, after in zip(events, events[1:]):
            if after["ts"] < before["ts"] + before["dur"] - 1:  # 1 us: rounding
                sys.exit(f"rank {rank}: {after['name']} starts before {before['name']} ends")
        spans[rank] = {event["name"]: (event["ts"], event["ts"] + event["dur"]) for event in events}
    if spans[1]["F0"][0] < spans[0]["F0"][1]:
        sys.exit("stage 1's first forward starts before stage 0's has ended")
    if spans[0]["B0"][0] < spans[1]["B0"][1]:
        sys.exit("stage 0's first backward starts before stage 1's has ended")
    # The data-parallel plan's measured trace: each rank's compute waits on a track of their own.
    fsdp = json.load(open(f"{out}/traces/fsdp.measured.json"))["traceEvents"]
    wait_tracks = {e["pid"] for e in fsdp if e.get("ph") == "M" and e.get("name") == "thread_name"
                   and e.get("tid") == 2 and e["args"]["name"] == "compute waits"}
    waits = [e for e in fsdp if e.get("ph") == "X" and e.get("cat") == "wait"]
    if not waits:  # the step's first gather is issued as it starts and waited for at once
        sys.exit("fsdp's measured trace has no compute waits")
    for event in waits:
        if event["pid"] not in wait_tracks:
            sys.exit(f"rank {event['pid']} waits with no compute-waits track")
        if event.get("tid") != 2 or event["dur"] <= 0 or event["args"]["waited_s"] <= 0:
            sys.exit(f"a wait off its track or of no length: {event}")
    # The layout's waits: stage 1 received stage 0's first output before its first forward.
    layout_waits = {e["pid"]: [] for e in measured if e.get("ph") == "X" and e.get("cat") == "wait"}
    for event in measured:
        if event.get("ph") == "X" and event.get("cat") == "wait":
            if event.get("tid") != 2 or event["dur"] <= 0:
                sys.exit(f"a layout's wait off its track or of no length: {event}")
            layout_waits[event["pid"]].append(event)
    receives = sorted((e for e in layout_waits.get(1, []) if e["name"] == "receive"),
                      key=lambda event: event["ts"])
    if not receives:
        sys.exit("stage 1 of the layout shows no receive wait")
    first_end = receives[0]["ts"] + receives[0]["dur"]
    if first_end > spans[1]["F0"][0] + 1:  # 1 us: rounding
        sys.exit(f"stage 1's first receive ends at {first_end} us, after its F0 starts")
    layout_tracks = {e["pid"] for e in measured if e.get("ph") == "M"
                     and e.get("name") == "thread_name" and e.get("tid") == 2}
    if 1 not in layout_tracks:
        sys.exit("stage 1's waits have no compute-waits track")
    simulated = json.load(open(f"{out}/traces/{name}.simulated.json"))["traceEvents"]
    if not any(event.get("ph") == "X" for event in simulated):
        sys.exit("the simulated trace has no passes")
    print(f"layout traces ok: {len(measured)} measured events, {len(simulated)} simulated")


if __name__ == "__main__":
    main()
