#!/usr/bin/env python3
"""Time error and exposed-communication error of every plan over several `osdp validate` runs,
one row per plan, one dot per run, coloured by the calibration the run used.

Usage: validation_spread.py [--title TEXT] OUTPUT_PNG LABEL=VALIDATE_JSON[#MODEL] [...]
Each VALIDATE_JSON is what `osdp validate ... --json` printed, or a fidelity.json of
bench/fidelity_bench (only its "plans" are read); runs with the same LABEL (e.g. the
calibration they used) share a colour; #MODEL names the plans' rows "MODEL: plan" (several
models' runs in one figure). Left: the time error, with
the validation's targets (median within 10 %, every plan within 20 %) shaded. Right: the
simulated minus the measured exposed communication of the critical rank (ms); a filled dot is
within the target (30 % or 5 ms of the measured median), a cross is not.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_validation_plans, run_runs_plot, save_atomically  # noqa: E402

COLOURS = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def read_runs(arguments):
    """[(label, plans)] in the order given; ValueError on a malformed argument or file."""
    runs = []
    for argument in arguments:
        label, separator, path = argument.partition("=")
        path, _, model = path.partition("#")
        if not separator or not label or not path:
            raise ValueError("%s: expected LABEL=VALIDATE_JSON[#MODEL]" % argument)
        plans = read_validation_plans(path, ("name", "time_error_percent",
                                             "measured_exposed_communication_s",
                                             "simulated_exposed_communication_s",
                                             "exposed_within_target"))
        if model:
            plans = [dict(plan, name="%s: %s" % (model, plan["name"])) for plan in plans]
        runs.append((label, plans))
    return runs


def plot(runs, out, title=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for _, plans in runs:
        for plan in plans:
            if plan["name"] not in names:
                names.append(plan["name"])
    labels = []
    for label, _ in runs:
        if label not in labels:
            labels.append(label)
    row = {name: len(names) - 1 - i for i, name in enumerate(names)}
    figure, (times, waits) = plt.subplots(1, 2, figsize=(12, 0.45 * len(names) + 2.1),
                                          sharey=True)
    times.axvspan(-20, 20, color="#f2f2f2", zorder=0)
    times.axvspan(-10, 10, color="#dff0d8", zorder=0)
    times.axvline(0, color="black", linewidth=0.8)
    waits.axvline(0, color="black", linewidth=0.8)
    # Each calibration's runs a little apart vertically, so that equal errors stay visible.
    offsets = {label: 0.25 * (i - (len(labels) - 1) / 2) / max(1, len(labels) - 1) * 2
               for i, label in enumerate(labels)}
    drawn = set()
    for label, plans in runs:
        colour = COLOURS[labels.index(label) % len(COLOURS)]
        for plan in plans:
            y = row[plan["name"]] + offsets[label]
            legend = label if label not in drawn else None
            drawn.add(label)
            times.plot(plan["time_error_percent"], y, "o", color=colour, alpha=0.8, label=legend)
            difference_ms = 1e3 * (plan["simulated_exposed_communication_s"]
                                   - plan["measured_exposed_communication_s"])
            within = bool(plan["exposed_within_target"])
            waits.plot(difference_ms, y, "o" if within else "x", color=colour, alpha=0.8,
                       markersize=6 if within else 8)
    times.set_yticks(range(len(names)))
    times.set_yticklabels(list(reversed(names)))
    times.set_xlabel("time error, simulated vs measured (%)\n(green: within 10 %, grey: 20 %)")
    waits.set_xlabel("exposed communication, simulated - measured (ms)\n"
                     "(dot: within 30 % or 5 ms, cross: not)")
    limit = max(25.0, max(abs(p["time_error_percent"]) for _, plans in runs for p in plans) + 3)
    times.set_xlim(-limit, limit)
    times.grid(axis="x", alpha=0.3)
    waits.grid(axis="x", alpha=0.3)
    handles, legend_labels = times.get_legend_handles_labels()
    figure.legend(handles, legend_labels, loc="lower center", ncol=len(labels), fontsize=9,
                  title="calibration (runs of the same one share a colour)", title_fontsize=9)
    figure.suptitle(title or "%d runs of osdp validate, %d calibration%s: every plan, every run"
                    % (len(runs), len(labels), "" if len(labels) == 1 else "s"))
    figure.tight_layout(rect=(0, 0.65 / figure.get_figheight(), 1, 1))
    save_atomically(figure, out, 120)


def main():
    return run_runs_plot(__file__, __doc__, read_runs, plot)


if __name__ == "__main__":
    sys.exit(main())
