#!/usr/bin/env python3
"""Every kept round of the CPU testbed's fidelity measurements in one figure: for each setting
(a column) and each round (along x), every plan's |time error| as a dot, the round's median as a
bar, and below it how many plans' exposed communication was within the target.

Usage: fidelity_history.py [--title TEXT] OUTPUT_PNG SETTING@ROUND=VALIDATE_JSON [...]
Each VALIDATE_JSON is what `osdp validate ... --json` printed, or a fidelity.json of
bench/fidelity_bench (only its "plans" are read). Files with the same SETTING and ROUND pool
into one round (e.g. the three unseen models of one calibration); settings are drawn in the
order first named, rounds in the order given. The validation's targets are drawn: median
within 10 %, every plan within 20 %, exposed communication within 30 % or 5 ms.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_validation_plans, run_runs_plot, save_atomically  # noqa: E402

MEDIAN_TARGET_PERCENT = 10.0
LARGEST_TARGET_PERCENT = 20.0


def read_rounds(arguments):
    """{setting: {round: [plan, ...]}}, both levels in the order first named; ValueError on a
    malformed argument or file."""
    settings = {}
    for argument in arguments:
        key, separator, path = argument.partition("=")
        setting, at, round_label = key.partition("@")
        if not separator or not at or not setting or not round_label or not path:
            raise ValueError("%s: expected SETTING@ROUND=VALIDATE_JSON" % argument)
        plans = read_validation_plans(path, ("time_error_percent", "exposed_within_target"))
        settings.setdefault(setting, {}).setdefault(round_label, []).extend(plans)
    return settings


def summary_lines(settings):
    """One text line per round: what the figure shows, for a reader without the image."""
    lines = []
    for setting, rounds in settings.items():
        for round_label, plans in rounds.items():
            errors = [abs(plan["time_error_percent"]) for plan in plans]
            within = sum(1 for plan in plans if plan["exposed_within_target"])
            lines.append("%s, %s: %d plans, median |time error| %.1f %%, largest %.1f %%, "
                         "exposed within target %d of %d"
                         % (setting, round_label, len(plans), statistics.median(errors),
                            max(errors), within, len(plans)))
    return lines


def plot(settings, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(settings)
    most_rounds = max(len(rounds) for rounds in settings.values())
    figure, axes = plt.subplots(rows, 1, figsize=(2.2 + 0.5 * most_rounds, 2.9 * rows + 0.6),
                                squeeze=False)
    largest = max(abs(p["time_error_percent"]) for rounds in settings.values()
                  for plans in rounds.values() for p in plans)
    top = max(LARGEST_TARGET_PERCENT + 5, largest + 2) + 4  # room for the exposed counts
    for axis, (setting, rounds) in zip((row[0] for row in axes), settings.items()):
        axis.axhspan(0, MEDIAN_TARGET_PERCENT, color="#dff0d8", zorder=0)
        axis.axhspan(MEDIAN_TARGET_PERCENT, LARGEST_TARGET_PERCENT, color="#f2f2f2", zorder=0)
        for x, (round_label, plans) in enumerate(rounds.items()):
            errors = sorted(abs(p["time_error_percent"]) for p in plans)
            # Plans of a round spread a little sideways, so that equal errors stay visible.
            spread = [x + 0.3 * (i / max(1, len(errors) - 1) - 0.5) for i in range(len(errors))]
            axis.plot(spread, errors, "o", color="#1f77b4", alpha=0.55, markersize=3.5)
            median = statistics.median(errors)
            axis.plot([x - 0.3, x + 0.3], [median, median], color="black", linewidth=2.2)
            within = sum(1 for p in plans if p["exposed_within_target"])
            axis.text(x, top - 1.2, "%d/%d" % (within, len(plans)), ha="center", va="top",
                      fontsize=7, color="#2ca02c" if within == len(plans) else "#555555",
                      fontweight="bold" if within == len(plans) else "normal")
        labels = list(rounds.keys())
        axis.set_xticks(range(len(labels)))
        axis.set_xticklabels(labels, rotation=35, ha="right", fontsize=7.5)
        axis.set_xlim(-0.6, max(len(labels), most_rounds) - 0.4)
        axis.set_ylim(0, top)
        axis.set_title("%s (top: plans whose exposed communication is within target)" % setting,
                       fontsize=9.5, loc="left")
        axis.set_ylabel("|time error| (%)", fontsize=8.5)
        axis.grid(axis="y", alpha=0.3)
    axes[-1][0].set_xlabel("round (date, then round or calibration and run)", fontsize=8.5)
    figure.suptitle(title or "Fidelity on the CPU testbed, every kept round: a dot per plan, a bar "
                    "for the round's median\n(green band: the median's target, 10 %; grey: "
                    "every plan's, 20 %)", fontsize=10)
    figure.tight_layout()
    save_atomically(figure, out, 110)


def plot_and_summarize(settings, out, title):
    plot(settings, out, title)
    print("\n".join(summary_lines(settings)))


def main():
    return run_runs_plot(__file__, __doc__, read_rounds, plot_and_summarize)


if __name__ == "__main__":
    sys.exit(main())
