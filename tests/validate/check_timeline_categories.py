#!/usr/bin/env python3
"""plots/timeline.py colours the runtime's measured events (osdp validate --out) by phase and
collective, as the simulator's: checks the mapping and that a measured trace's memory counters
are read.  Usage: check_timeline_categories.py PLOTS_DIR TRACE_DIR"""
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
import timeline  # noqa: E402

expected = {
    ("compute", "layer0.attention forward"): "forward",
    ("compute", "layer3.mlp backward"): "backward",
    ("compute", "layer1.mlp recompute"): "recompute",
    ("compute", "optimizer step"): "optimizer",
    ("compute", "embedding forward"): "forward",
    ("communication", "all-gather"): "all_gather",
    ("communication", "reduce-scatter"): "reduce_scatter",
    ("communication", "all-reduce"): "all_reduce",
    ("ag_forward", "all-gather op1"): "ag_forward",  # the simulator's own category
    ("wait", "wait"): "wait",  # the runtime's compute waits, on a track of their own
    ("wait", "receive"): "wait",  # a pipeline stage's wait for its neighbour
    ("compute", "F3"): "forward",  # a layout's passes: micro-batch 3's forward
    ("compute", "B0:1"): "backward",  # micro-batch 0's backward through the second chunk
}
for (category, name), colour in expected.items():
    got = timeline.category_of({"cat": category, "name": name})
    assert got == colour, f"{category}/{name}: {got}, expected {colour}"
    assert colour in timeline.COLOURS, colour

trace_dir = sys.argv[2]
with open(os.path.join(trace_dir, "trace.json"), "w") as handle:
    json.dump({"traceEvents": [
        {"ph": "X", "cat": "compute", "name": "layer0.mlp forward", "pid": 0, "tid": 0,
         "ts": 0, "dur": 5},
        {"ph": "C", "name": "live memory", "pid": 0, "ts": 7, "args": {"live_bytes": 2048}},
        {"ph": "C", "name": "live memory", "pid": 0, "ts": 3, "args": {"live_bytes": 1024}},
    ]}, handle)
spans, counters, _, _ = timeline.read_trace(os.path.join(trace_dir, "trace.json"))
assert len(spans) == 1 and len(counters) == 2, (spans, counters)
print("timeline categories ok")
