#!/usr/bin/env python3
"""How many operators OSDP keeps replicated (DP) at each batch size per rank.

Usage: dp_operators_vs_batch.py DATA_JSON OUTPUT_PNG
DATA_JSON is what scripts/reproduce-paper.sh writes (docs/figures/dp-operators-vs-batch.json):
per batch size, the operators of OSDP's plan (`osdp plan S --micro-batch B --json`, and the same
with `--split 1`) counted by choice: dp (replicated), zdp with only some of its slices sharded
(`zdp k/4`, k < 4: the other slices replicated) and zdp fully sharded. One panel per search
space, one stacked bar per batch; a batch where no plan fits has no bar (an x on the axis).
Exit codes: 0 written, 2 bad input, 3 no matplotlib.
"""
import sys

from plot_support import run_data_plot, save_atomically  # noqa: E402

# key in the data, legend label, colour
KINDS = [("dp", "dp (replicated)", "#4e79a7"),
         ("zdp_partial", "zdp k/4, k < 4 (some slices replicated)", "#a0cbe8"),
         ("zdp", "zdp (fully sharded)", "#f28e2b")]
PANELS = [("osdp", "OSDP, scenario's options (split 1 or 4)"),
          ("osdp_split1", "OSDP without splitting (--split 1)")]


def plot(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = data["points"]
    figure, axes = plt.subplots(1, len(PANELS), sharey=True, figsize=(11, 5))
    for axis, (key, title) in zip(axes, PANELS):
        bottoms = {}
        for kind, label, colour in KINDS:
            xs, heights, starts = [], [], []
            for p in points:
                plan = p[key]
                if plan is None:
                    continue
                xs.append(p["batch"])
                heights.append(plan[kind])
                starts.append(bottoms.get(p["batch"], 0))
                bottoms[p["batch"]] = bottoms.get(p["batch"], 0) + plan[kind]
            axis.bar(xs, heights, 0.8, bottom=starts, color=colour, label=label)
        for p in points:
            plan = p[key]
            if plan is None:
                axis.plot([p["batch"]], [0], marker="x", color="#c44e52", clip_on=False)
            elif plan["dp"]:
                axis.text(p["batch"], plan["dp"], str(plan["dp"]), ha="center", va="bottom",
                          fontsize=7, color="#1f3b5c")
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("batch size per rank (x: no plan fits)")
        axis.set_xticks([p["batch"] for p in points])
        axis.tick_params(axis="x", labelsize=8)
        axis.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("operators (of %d)" % data["operators"])
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(KINDS))
    figure.suptitle("%s, %s cost model: OSDP's operators per mode at a fixed batch size "
                    "(number on a bar: dp operators)" % (data["scenario"], data["cost_model"]),
                    fontsize=10)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    save_atomically(figure, out, dpi=110)
    print(out)


def check(data):
    if not data["points"]:
        raise ValueError("no batch sizes in the data")


def main():
    return run_data_plot(__file__, __doc__, "dp-operators-vs-batch.json", check, plot)


if __name__ == "__main__":
    sys.exit(main())
