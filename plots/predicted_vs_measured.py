#!/usr/bin/env python3
"""Predicted (simulated) against measured iteration time and peak memory, one point per plan.

Usage: predicted_vs_measured.py VALIDATION_CSV OUTPUT_PNG
VALIDATION_CSV is the validation.csv that `osdp validate --out DIR` writes.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        print(f"{argv[1]}: no plans", file=sys.stderr)
        return 2
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    panels = [
        ("iteration time (ms)", "measured_iteration_time_s", "simulated_iteration_time_s", 1e3),
        ("peak memory (MiB)", "measured_peak_memory_bytes", "simulated_peak_memory_bytes", 1 / 2**20),
    ]
    for axis, (label, measured_key, simulated_key, scale) in zip(axes, panels):
        measured = [float(row[measured_key]) * scale for row in rows]
        simulated = [float(row[simulated_key]) * scale for row in rows]
        axis.scatter(measured, simulated, zorder=3)
        for row, x, y in zip(rows, measured, simulated):
            axis.annotate(row["plan"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        high = max(measured + simulated) * 1.1
        axis.plot([0, high], [0, high], color="grey", linestyle="--", linewidth=1, label="exact")
        axis.plot([0, high], [0, high * 1.1], color="grey", linestyle=":", linewidth=1, label="±10 %")
        axis.plot([0, high], [0, high * 0.9], color="grey", linestyle=":", linewidth=1)
        axis.set_xlim(0, high)
        axis.set_ylim(0, high)
        axis.set_xlabel(f"measured {label}")
        axis.set_ylabel(f"simulated {label}")
        axis.grid(True, alpha=0.3)
        axis.legend(loc="upper left", fontsize=8)
    figure.suptitle("osdp validate: predicted vs measured")
    figure.tight_layout()
    figure.savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
