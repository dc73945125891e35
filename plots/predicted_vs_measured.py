#!/usr/bin/env python3
"""Predicted (simulated) against measured iteration time and peak memory, one point per plan;
and, when the CSV has the measured waits' spread, exposed communication.

Usage: predicted_vs_measured.py VALIDATION_CSV OUTPUT_PNG
VALIDATION_CSV is the validation.csv that `osdp validate --out DIR` (or fidelity_bench) writes.
A measured time's bar is the middle half of its iterations (first to third quartile), when the
CSV has it: plans whose bars overlap are ties the runs cannot order. Plans at the same point
share one label ("osdp = all-z2"); labels are spread apart along the side of the plot.
The third panel is the critical rank's exposed communication a step (the time its compute
waited for collectives), its bar the middle half over the iterations, on log axes, shaded where
the simulated wait is within 30 % or 5 ms of the measured median (the validation's target).
"""
import csv
import io
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_input_text, save_atomically  # noqa: E402

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def merged_points(names, xs, ys, tolerance):
    """Plans within `tolerance` (relative) of each other in both figures: one point, one label."""
    groups = []
    for name, x, y in zip(names, xs, ys):
        for group in groups:
            if abs(group[1] - x) <= tolerance * x and abs(group[2] - y) <= tolerance * y:
                group[0].append(name)
                break
        else:
            groups.append([[name], x, y])
    return [(" = ".join(group[0]), group[1], group[2]) for group in groups]


def spread_labels(ys, gap):
    """Label heights near `ys`, in the same order, at least `gap` apart."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [0.0] * len(ys)
    previous = None
    for i in order:
        placed[i] = ys[i] if previous is None else max(ys[i], previous + gap)
        previous = placed[i]
    return placed


def exposed_panel(axis, rows):
    """Simulated against measured exposed communication (ms), log axes, the target shaded."""
    floor_ms = 0.5  # waits under half a millisecond are drawn at it (a log axis has no zero)
    measured = [max(floor_ms, 1e3 * float(r["measured_exposed_communication_s"])) for r in rows]
    simulated = [max(floor_ms, 1e3 * float(r["simulated_exposed_communication_s"])) for r in rows]
    q1 = [max(floor_ms, 1e3 * float(r["measured_exposed_communication_q1_s"])) for r in rows]
    q3 = [max(floor_ms, 1e3 * float(r["measured_exposed_communication_q3_s"])) for r in rows]
    # Whether each plan is within the target, as osdp decides it (validate/comparison.cpp).
    within = [r["exposed_within_target"] == "1" for r in rows]
    lowest = min(measured + simulated + q1) / 1.5
    highest = max(measured + simulated + q3) * 1.5
    grid = [lowest * (highest / lowest) ** (i / 200) for i in range(201)]
    axis.fill_between(grid, [max(lowest, m - max(5.0, 0.3 * m)) for m in grid],
                      [m + max(5.0, 0.3 * m) for m in grid], color="tab:green", alpha=0.12,
                      label="within 30 % or 5 ms")
    axis.plot([lowest, highest], [lowest, highest], color="grey", linestyle="--", linewidth=1,
              label="exact")
    for hit, colour, label in ((True, "tab:blue", "measured middle half"),
                               (False, "tab:red", "outside the target")):
        chosen = [i for i in range(len(rows)) if within[i] == hit]
        if not chosen:
            continue
        axis.errorbar([measured[i] for i in chosen], [simulated[i] for i in chosen],
                      xerr=[[measured[i] - q1[i] for i in chosen], [q3[i] - measured[i] for i in chosen]],
                      fmt="o", color=colour, capsize=3, zorder=3, label=label)
    # Labels right of the points, spread apart in log space.
    points = merged_points([row["plan"] for row in rows], measured, simulated, 0.005)
    logs = spread_labels([math.log10(y) for _, _, y in points], 0.06 * math.log10(highest / lowest))
    label_x = max(q3) * 1.6
    for (name, x, y), height in zip(points, logs):
        axis.annotate(name, (x, y), xytext=(label_x, 10 ** height), fontsize=8, va="center",
                      arrowprops={"arrowstyle": "-", "color": "grey", "linewidth": 0.6})
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlim(lowest, max(highest, label_x * 4))
    axis.set_ylim(lowest, max(highest, 10 ** max(logs) * 1.3))
    axis.set_xlabel("measured exposed communication (ms, critical rank)")
    axis.set_ylabel("simulated exposed communication (ms)")
    axis.set_title(f"{sum(within)} of {len(rows)} plans within 30 % or 5 ms", fontsize=10)
    axis.grid(True, alpha=0.3, which="both")
    axis.legend(loc="upper left", fontsize=8)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    if os.path.isdir(argv[2]) or argv[2].endswith("/"):
        print(f"predicted_vs_measured.py: error: {argv[2]}: a directory, not the PNG to write",
              file=sys.stderr)
        return 2
    try:
        rows = list(csv.DictReader(io.StringIO(read_input_text(argv[1]))))
    except ValueError as error:
        print(f"predicted_vs_measured.py: error: {error}", file=sys.stderr)
        return 2
    if not rows:
        print(f"{argv[1]}: no plans", file=sys.stderr)
        return 2
    missing = [key for key in ("plan", "measured_iteration_time_s", "simulated_iteration_time_s",
                               "measured_peak_memory_bytes", "simulated_peak_memory_bytes")
               if key not in rows[0]]
    if missing:
        print(f"predicted_vs_measured.py: error: {argv[1]}: no column {missing[0]!r} (expected "
              "the validation.csv of `osdp validate --out`)", file=sys.stderr)
        return 2
    with_exposed = "exposed_within_target" in rows[0]
    figure, axes = plt.subplots(1, 3 if with_exposed else 2, figsize=(16.5 if with_exposed else 11, 5))
    panels = [
        ("iteration time (ms)", "measured_iteration_time", "simulated_iteration_time_s", 1e3),
        ("peak memory (MiB)", "measured_peak_memory_bytes", "simulated_peak_memory_bytes", 1 / 2**20),
    ]
    for axis, (label, measured_key, simulated_key, scale) in zip(axes, panels):
        is_time = measured_key == "measured_iteration_time"
        measured = [float(row[measured_key + ("_s" if is_time else "")]) * scale for row in rows]
        simulated = [float(row[simulated_key]) * scale for row in rows]
        high = [0.0]
        if is_time and "measured_iteration_time_q1_s" in rows[0]:
            low = [m - float(r["measured_iteration_time_q1_s"]) * scale for r, m in zip(rows, measured)]
            high = [float(r["measured_iteration_time_q3_s"]) * scale - m for r, m in zip(rows, measured)]
            axis.errorbar(measured, simulated, xerr=[[max(0, v) for v in low], [max(0, v) for v in high]],
                          fmt="o", capsize=3, zorder=3, label="measured middle half")
        else:
            axis.scatter(measured, simulated, zorder=3)
        # Zoomed on the plans (not from zero): a 10 % miss is then visible. Labels in a column
        # right of the points, spread apart, with a leader line to their point.
        lowest = min(measured + simulated) * 0.85
        highest = max(measured + simulated) * 1.08
        span = highest - lowest
        points = merged_points([row["plan"] for row in rows], measured, simulated, 0.005)
        heights = spread_labels([y for _, _, y in points], 0.06 * span)
        label_x = max(measured) + (max(high) if is_time and "measured_iteration_time_q1_s" in rows[0]
                                   else 0) + 0.08 * span
        for (name, x, y), height in zip(points, heights):
            axis.annotate(name, (x, y), xytext=(label_x, height), fontsize=8, va="center",
                          arrowprops={"arrowstyle": "-", "color": "grey", "linewidth": 0.6})
        axis.plot([lowest, highest], [lowest, highest], color="grey", linestyle="--", linewidth=1,
                  label="exact")
        axis.plot([lowest, highest], [lowest * 1.1, highest * 1.1], color="grey", linestyle=":",
                  linewidth=1, label="±10 %")
        axis.plot([lowest, highest], [lowest * 0.9, highest * 0.9], color="grey", linestyle=":",
                  linewidth=1)
        axis.set_xlim(lowest, max(highest, label_x + 0.3 * span))
        axis.set_ylim(lowest, max(highest, max(heights) + 0.05 * span))
        axis.set_xlabel(f"measured {label}")
        axis.set_ylabel(f"simulated {label}")
        axis.grid(True, alpha=0.3)
        axis.legend(loc="upper left", fontsize=8)
    if with_exposed:
        exposed_panel(axes[2], rows)
    figure.suptitle("osdp validate: predicted vs measured")
    figure.tight_layout()
    try:
        save_atomically(figure, argv[2], 120)
    except OSError as error:
        print(f"predicted_vs_measured.py: error: {argv[2]}: {error.strerror or error}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
