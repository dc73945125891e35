#!/usr/bin/env python3
"""The OSDP paper's published gains against osdp's, one group of bars per experiment.

Usage: paper_vs_osdp.py SUMMARY_JSON OUTPUT_PNG
SUMMARY_JSON is what scripts/reproduce-paper.sh writes beside the report
(docs/figures/paper-vs-osdp.json): per experiment its id, the published maximum gain over the
baseline (null when not published) and osdp's maximum under the paper cost model, the extended
one and in simulation (extended-model plans). Writes OUTPUT_PNG and the same name in .svg.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = [("paper", "paper (published)", "#333333"),
          ("paper_model", "osdp, paper cost model", "#4e79a7"),
          ("extended", "osdp, extended cost model", "#f28e2b"),
          ("simulated", "osdp, simulated (extended-model plans)", "#59a14f")]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as handle:
        rows = json.load(handle)
    figure, axis = plt.subplots(figsize=(11, 4.6))
    width = 0.2
    for k, (key, label, colour) in enumerate(SERIES):
        xs, heights = [], []
        for i, row in enumerate(rows):
            if row.get(key) is not None:
                xs.append(i + (k - 1.5) * width)
                heights.append(row[key])
        axis.bar(xs, heights, width, label=label, color=colour)
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels([row["id"] for row in rows])
    axis.set_ylabel("largest gain over the baseline (%)")
    axis.set_title("OSDP paper (published) against osdp, per experiment (docs/paper-reproduction.md)")
    axis.axhline(0, color="#999999", linewidth=0.8)
    axis.legend(fontsize=8, loc="upper left")
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(sys.argv[2], dpi=110)
    # No date and fixed element ids: the SVG changes only when the figures do.
    matplotlib.rcParams["svg.hashsalt"] = "osdp"
    figure.savefig(sys.argv[2].rsplit(".", 1)[0] + ".svg", metadata={"Date": None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
