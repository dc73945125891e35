#!/usr/bin/env python3
"""Simulated memory over one iteration with and without operator splitting, against the limit.

Usage: memory_timeline_split.py DATA_JSON OUTPUT_PNG
DATA_JSON is what scripts/reproduce-paper.sh writes (docs/figures/memory-timeline-split.json):
for each variant (`osdp simulate S --trace T`, and the same with `--split 1`), each at the batch
size its own plan chose, the memory counters of one rank from the Chrome trace (seconds, bytes
per part: model states, activations, gathered parameters, unsharded gradients, ...). Top: live
memory of both over time, with the GPU memory limit; below, one panel per variant with what the
memory holds. Exit codes: 0 written, 2 bad input, 3 no matplotlib.
"""
import sys

from plot_support import run_data_plot, save_atomically  # noqa: E402

COLOURS = ["#f28e2b", "#4e79a7"]
# Parts of the memory, as the trace's counters name them, grouped for the stacked panels.
PARTS = [("model states", ("model_states",), "#bab0ac"),
         ("activations", ("activations", "recomputed_activations"), "#59a14f"),
         ("gathered parameters", ("gathered_parameters",), "#e15759"),
         ("unsharded gradients", ("unsharded_gradients",), "#b07aa1"),
         ("workspace and other", ("workspace", "extra"), "#76b7b2")]


def series(variant):
    """Times (s) and, per part of PARTS, GiB at each counter event."""
    names = variant["components"]
    times = [p[0] for p in variant["points"]]
    parts = []
    for _, keys, _ in PARTS:
        idx = [names.index(k) for k in keys if k in names]
        parts.append([sum(p[1 + i] for i in idx) / 2.0 ** 30 for p in variant["points"]])
    return times, parts


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gib = 2.0 ** 30
    limit = data["memory_limit_bytes"] / gib
    variants = data["variants"]
    figure = plt.figure(figsize=(11, 7.6))
    grid = figure.add_gridspec(2, len(variants), height_ratios=[3, 2.4])
    top = figure.add_subplot(grid[0, :])
    end = max(v["points"][-1][0] for v in variants)
    for k, v in enumerate(variants):
        times, parts = series(v)
        total = [sum(col) for col in zip(*parts)]
        top.step(times + [v["iteration_time_s"]], total + [total[-1]], where="post",
                 color=COLOURS[k % len(COLOURS)], linewidth=1.4,
                 label="%s: batch %d, %.2f samples/s; peak %.2f GiB: %s" % (
                     v["label"], v["batch_size"], v["throughput_samples_per_s"],
                     v["peak_memory_bytes"] / gib, v["peak_memory_cause"]))
        if v.get("peak_memory_rank", data["rank"]) == data["rank"]:
            top.plot([v["peak_memory_time_s"]], [v["peak_memory_bytes"] / gib], marker="v",
                     color=COLOURS[k % len(COLOURS)])
    top.axhline(limit, color="#c44e52", linestyle="--", linewidth=1,
                label="memory limit %.0f GiB" % limit)
    top.set_xlim(0, max(end, max(v["iteration_time_s"] for v in variants)))
    top.set_ylim(0, limit * 1.12)
    top.set_ylabel("live memory, rank %d (GiB)" % data["rank"])
    top.set_xlabel("time in the iteration (s)")
    top.set_title("%s: one simulated iteration with and without operator splitting, "
                  "each at its plan's batch size" % data["scenario"], fontsize=10)
    top.grid(alpha=0.3)
    top.legend(fontsize=7.5, loc="lower right")
    for k, v in enumerate(variants):
        axis = figure.add_subplot(grid[1, k])
        times, parts = series(v)
        times = times + [v["iteration_time_s"]]
        base = [0.0] * len(times)
        for (label, _, colour), values in zip(PARTS, parts):
            values = values + [values[-1]]
            upper = [b + x for b, x in zip(base, values)]
            axis.fill_between(times, base, upper, step="post", color=colour, label=label,
                              linewidth=0)
            base = upper
        axis.axhline(limit, color="#c44e52", linestyle="--", linewidth=1)
        axis.set_xlim(0, times[-1])
        axis.set_ylim(0, limit * 1.12)
        axis.set_title("%s (batch %d): what the memory holds" % (v["label"], v["batch_size"]),
                       fontsize=9)
        axis.set_xlabel("time in the iteration (s)")
        axis.grid(alpha=0.3)
        if k == 0:
            axis.set_ylabel("GiB")
            axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    save_atomically(figure, out, dpi=110)
    print(out)


def check(data):
    if not data["variants"] or not all(v["points"] for v in data["variants"]):
        raise ValueError("a variant has no memory counters")


def main():
    return run_data_plot(__file__, __doc__, "memory-timeline-split.json", check, plot)


if __name__ == "__main__":
    sys.exit(main())
