#!/usr/bin/env python3
"""Throughput and peak memory against the batch size per rank: OSDP, OSDP without splitting, FSDP.

Usage: throughput_vs_batch.py DATA_JSON OUTPUT_PNG
DATA_JSON is what scripts/reproduce-paper.sh writes (docs/figures/throughput-vs-batch.json):
one `osdp plan S --micro-batch B --json` per batch size B (and the same with `--split 1`), with
per batch and strategy the analytic throughput and peak memory, or that it does not fit (and the
memory it would need, where osdp says). Top: throughput of the batches that fit (a batch that does
not fit is not plotted; a cross on the x axis marks it). Bottom: peak memory against the limit;
a hollow marker is the memory a batch that does not fit would need. Exit codes: 0 written, 2 bad
input, 3 no matplotlib.
"""
import sys

from plot_support import run_data_plot, save_atomically  # noqa: E402

# key in the data, legend label, colour, marker
SERIES = [("osdp", "OSDP (scenario's options: split 1 or 4)", "#f28e2b", "o"),
          ("osdp_split1", "OSDP without splitting (--split 1)", "#4e79a7", "s"),
          ("fsdp", "FSDP (baseline, same cost model)", "#333333", "^")]


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gib = 2.0 ** 30
    limit = data["memory_limit_bytes"] / gib
    points = data["points"]
    batches = [p["batch"] for p in points]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 7.2),
                                         gridspec_kw={"height_ratios": [3, 2]})
    for k, (key, label, colour, marker) in enumerate(SERIES):
        fit = [(p["batch"], p[key]) for p in points if p[key]["fits"]]
        nofit = [(p["batch"], p[key]) for p in points if not p[key]["fits"]]
        if fit:
            best = max(fit, key=lambda bp: bp[1]["throughput_samples_per_s"])
            top.plot([b for b, _ in fit], [f["throughput_samples_per_s"] for _, f in fit],
                     marker=marker, color=colour,
                     label="%s; best %.2f samples/s at b %d" % (
                         label, best[1]["throughput_samples_per_s"], best[0]))
            bottom.plot([b for b, _ in fit], [f["peak_memory_bytes"] / gib for _, f in fit],
                        marker=marker, color=colour)
        if nofit:
            top.plot([b + (k - 1) * 0.18 for b, _ in nofit], [0.0] * len(nofit),
                     linestyle="none", marker="x", color=colour, markersize=7, clip_on=False)
            needs = [(b, f["needs_bytes"] / gib) for b, f in nofit if f.get("needs_bytes")]
            if needs:
                bottom.plot([b for b, _ in needs], [m for _, m in needs], linestyle="none",
                            marker=marker, markerfacecolor="none", color=colour)
    top.set_ylabel("throughput (samples/s, all ranks)")
    top.set_ylim(bottom=0)
    top.set_title("%s, %s cost model: throughput at a fixed batch size\n"
                  "(x on the axis: does not fit in %.0f GiB)" % (
                      data["scenario"], data["cost_model"], limit), fontsize=10)
    top.grid(alpha=0.3)
    top.legend(fontsize=8, loc="upper left")
    bottom.axhline(limit, color="#c44e52", linestyle="--", linewidth=1,
                   label="memory limit %.0f GiB" % limit)
    bottom.set_ylabel("peak memory per GPU (GiB)")
    bottom.set_xlabel("batch size per rank")
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8, loc="lower right",
                  title="hollow: memory needed where it does not fit", title_fontsize=8)
    bottom.set_xticks(batches)
    figure.tight_layout()
    save_atomically(figure, out, dpi=110)
    print(out)


def check(data):
    if not data["points"]:
        raise ValueError("no batch sizes in the data")


def main():
    return run_data_plot(__file__, __doc__, "throughput-vs-batch.json", check, plot)


if __name__ == "__main__":
    sys.exit(main())
