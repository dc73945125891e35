#!/usr/bin/env python3
"""Gantt timeline and memory over time of a simulated iteration, from `osdp simulate --trace`,
or of a measured one, from `osdp validate --out DIR` (DIR/traces/PLAN.measured.json beside
PLAN.simulated.json: the runtime's events coloured by phase and collective as the simulator's).

Usage: timeline.py TRACE_JSON [TRACE_JSON ...] [--out DIR] [--name NAME] [--ranks 0,1] [--title TEXT]
Reads the Chrome trace (times in microseconds, memory counters in bytes) and writes
DIR/timeline.png and DIR/timeline.svg (DIR defaults to the trace's folder): on top one row per
rank and stream (compute, then each communication lane), coloured by phase and collective
category, like Figure 1 of the OSDP paper; below, each selected rank's live memory over time.
Several traces share one time axis: the teaching chart "one operator in DP vs ZDP" is
  osdp simulate scenarios/paper-form.json --plan scenarios/sim-paper-form-dp.plan.json --trace dp.json
  osdp simulate scenarios/paper-form.json --plan scenarios/sim-paper-form-zdp.plan.json --trace zdp.json
  timeline.py dp.json zdp.json --name dp_vs_zdp
Each file is written to a temporary name first and renamed into place.
Exit codes: 0 written, 2 bad input, 3 no matplotlib.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_input_json  # noqa: E402

COLOURS = {
    "forward": "#4c72b0",
    "recompute": "#8172b2",
    "backward": "#55a868",
    "optimizer": "#937860",
    "ag_forward": "#dd8452",
    "ag_backward": "#c44e52",
    "ag_recompute": "#da8bc3",
    "reduce_scatter": "#8c8c8c",
    "all_reduce": "#ccb974",
    "reduce": "#ccb974",  # a pipeline stage's gradient reductions (osdp simulate --pp --trace)
    "all_gather": "#e6a06e",  # the runtime's gathers (osdp validate --out), forward or backward
    "wait": "#111111",  # a rank's compute blocked on communication or a neighbouring stage (own track)
}

# The runtime's trace (osdp validate --out) names its events, in two categories.
MEASURED_COLLECTIVES = {"all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
                        "all-reduce": "all_reduce"}


PIPELINE_PASS = re.compile(r"^[FB][0-9]+(:[0-9]+)?$")


def category_of(event):
    """The colour category of a trace event: the simulator's own, or a measured event's phase
    (from its name: "layer0.mlp backward", "optimizer step") or collective."""
    category = event.get("cat", "")
    name = event.get("name", "")
    if category == "compute":
        # A pipeline stage's pass (osdp validate --out of a layout): "F3", or "B3:1" through the
        # stage's second model chunk.
        if PIPELINE_PASS.match(name):
            return "forward" if name.startswith("F") else "backward"
        for phase in ("recompute", "forward", "backward", "optimizer"):
            if phase in name.split() or name.startswith(phase):
                return phase
        return category
    if category == "communication":
        return MEASURED_COLLECTIVES.get(name, category)
    return category


def read_trace(path):
    """Returns (spans, counters, track names, process names) from a Chrome trace file."""
    trace = read_input_json(path)
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError(f"{path}: expected a Chrome trace with \"traceEvents\" (osdp simulate --trace)")
    spans, counters, tracks, processes = [], [], {}, {}
    def number(event, key, at_least=None):
        value = event.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                at_least is not None and value < at_least):
            raise ValueError(f"{path}: an event's {key!r} is {value!r}: expected a number"
                             + ("" if at_least is None else f" of at least {at_least}"))

    for event in events:
        if not isinstance(event, dict):
            raise ValueError(f"{path}: an event is {event!r}: expected an object")
        phase = event.get("ph")
        if phase in ("X", "C"):
            number(event, "ts")
            number(event, "pid")
        if phase == "X":
            number(event, "dur", 0)
            spans.append(event)
        elif phase == "C" and event.get("name") in ("memory", "live memory"):
            counters.append(event)
        elif phase == "M" and event.get("name") == "thread_name":
            tracks[(event["pid"], event["tid"])] = event["args"]["name"]
        elif phase == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
    if not spans:
        raise ValueError(f"{path}: the trace has no complete (\"X\") events")
    return spans, counters, tracks, processes


def parse_ranks(text, available):
    if text is None:
        return sorted(available)[:4]
    try:
        ranks = [int(item) for item in text.split(",") if item]
    except ValueError:
        raise ValueError(f"--ranks: expected a list of rank numbers like 0,1, not {text!r}")
    missing = [r for r in ranks if r not in available]
    if missing or not ranks:
        raise ValueError(f"--ranks: ranks {missing or text} are not in the trace")
    return ranks


def save(figure, out_dir, name):
    for extension in ("png", "svg"):
        final = os.path.join(out_dir, f"{name}.{extension}")
        temporary = os.path.join(out_dir, f".{name}.{os.getpid()}.tmp.{extension}")
        figure.savefig(temporary, dpi=150, bbox_inches="tight")
        os.replace(temporary, final)
        print(final)


def plot(traces, ranks, title, out_dir, name):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = []
    for index, (label, (spans, _, _, _)) in enumerate(traces):
        rows += sorted({(index, e["pid"], e["tid"]) for e in spans if e["pid"] in ranks})
    row_of = {key: i for i, key in enumerate(rows)}
    figure, (gantt, memory) = plt.subplots(
        2, 1, sharex=True, figsize=(12, 2 + 0.45 * len(rows) + 3),
        gridspec_kw={"height_ratios": [max(1.5, 0.45 * len(rows)), 2.5]})
    used = set()
    by_row_and_category = {}
    for index, (label, (spans, _, _, _)) in enumerate(traces):
        for event in spans:
            key = (index, event["pid"], event["tid"])
            if key not in row_of:
                continue
            category = category_of(event)
            used.add(category)
            bar = (event["ts"] / 1e3, event["dur"] / 1e3)
            by_row_and_category.setdefault((row_of[key], category), []).append(bar)
    for (row, category), bars in sorted(by_row_and_category.items()):
        gantt.broken_barh(bars, (row - 0.4, 0.8), facecolors=COLOURS.get(category, "#333333"),
                          edgecolor="white", linewidth=0.2)
    gantt.set_yticks(range(len(rows)))
    def row_label(index, pid, tid):
        label, (_, _, tracks, processes) = traces[index]
        prefix = f"{label}: " if len(traces) > 1 else ""
        return f"{prefix}{processes.get(pid, pid)} / {tracks.get((pid, tid), tid)}"

    gantt.set_yticklabels([row_label(*row) for row in rows])
    gantt.invert_yaxis()
    gantt.legend(handles=[Patch(color=COLOURS[c], label=c.replace("_", " ")) for c in COLOURS if c in used],
                 loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    gantt.set_title(title)
    any_counters = False
    for label, (_, counters, _, processes) in traces:
        for rank in ranks:
            points = sorted((e["ts"] / 1e3, sum(e["args"].values()) / 2**30)
                            for e in counters if e["pid"] == rank)
            if points:
                any_counters = True
                times, live = zip(*points)
                prefix = f"{label}: " if len(traces) > 1 else ""
                memory.step(times, live, where="post", label=prefix + processes.get(rank, f"rank {rank}"))
    memory.set_xlabel("time (ms)")
    memory.set_ylabel("live memory (GiB)")
    memory.grid(True, alpha=0.3)
    if any_counters:
        memory.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    save(figure, out_dir, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", metavar="trace")
    parser.add_argument("--out", help="output folder (default: the first trace's folder)")
    parser.add_argument("--name", default="timeline", help="output file name without extension")
    parser.add_argument("--ranks", help="ranks to show, e.g. 0,1 (default: the first four)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    try:
        traces = [(os.path.splitext(os.path.basename(path))[0], read_trace(path)) for path in args.traces]
        available = set.intersection(*({e["pid"] for e in trace[0]} for _, trace in traces))
        ranks = parse_ranks(args.ranks, available)
        if not args.name or "/" in args.name or args.name.startswith("."):
            raise ValueError(f"--name: expected a plain file name, not {args.name!r}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"timeline.py: error: {error}", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # A pyenv or venv python3 first on the PATH often lacks Debian's python3-matplotlib:
        # run again with the system's (as `osdp sweep` finds it).
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        print("timeline.py: matplotlib is missing (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 3
    out_dir = args.out or os.path.dirname(os.path.abspath(args.traces[0]))
    title = args.title or "simulated iteration: " + " vs ".join(label for label, _ in traces)
    try:
        os.makedirs(out_dir, exist_ok=True)
        plot(traces, ranks, title, out_dir, args.name)
    except OSError as error:
        print(f"timeline.py: error: --out {out_dir}: {error.strerror or error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
