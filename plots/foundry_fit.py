#!/usr/bin/env python3
"""llm-foundry's FSDP runs against osdp: step time and "will it fit", one point per run.

Usage: foundry_fit.py PREDICT_JSON FIT_JSON OUTPUT_PNG
PREDICT_JSON is what `osdp predict scenarios/llmfoundry-mpt.json --table T --json` prints,
FIT_JSON what `osdp fit scenarios/llmfoundry-mpt.json --table T --out DIR --json` prints.
Left: predicted against measured step time with the shipped (fitted) constants. Middle: each
model size predicted by constants fitted without it. Right: each run's predicted peak memory
as a fraction of its GPU's memory (every run really ran, so every point must stay below 1).
Colour is the GPU type; hollow markers are runs with activation checkpointing.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GPUS = ["a100_40gb", "a100_80gb", "h100_80gb"]
SIZES = ["125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b"]


def mape(pairs):
    return 100.0 * sum(abs(p - m) / m for m, p in pairs) / len(pairs) if pairs else float("nan")


def scatter(axis, rows, predicted_key, title):
    colours = plt.get_cmap("tab10")
    pairs = []
    for index, gpu in enumerate(GPUS):
        for checkpointed in (False, True):
            chosen = [r for r in rows if r["gpu"] == gpu and r["checkpointed"] == checkpointed
                      and r.get(predicted_key) is not None]
            if not chosen:
                continue
            measured = [r["measured"] for r in chosen]
            predicted = [r[predicted_key] for r in chosen]
            pairs += list(zip(measured, predicted))
            axis.scatter(measured, predicted, s=22, alpha=0.8,
                         facecolors="none" if checkpointed else colours(index),
                         edgecolors=colours(index),
                         label=f"{gpu}{', checkpointed' if checkpointed else ''}")
    low = min(min(m, p) for m, p in pairs) * 0.8
    high = max(max(m, p) for m, p in pairs) * 1.25
    axis.plot([low, high], [low, high], color="grey", linewidth=0.8)
    axis.fill_between([low, high], [low * 0.9, high * 0.9], [low * 1.1, high * 1.1],
                      color="grey", alpha=0.12, label="within 10 %")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlim(low, high)
    axis.set_ylim(low, high)
    axis.set_xlabel("measured step time (s)")
    axis.set_ylabel("predicted step time (s)")
    axis.set_title(f"{title}\nMAPE {mape(pairs):.1f} % over {len(pairs)} runs", fontsize=10)
    axis.grid(True, which="both", alpha=0.3)


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as handle:
        predict = json.load(handle)
    with open(sys.argv[2]) as handle:
        fit = json.load(handle)
    by_line = {row["line"]: row for row in fit["predictions"]}
    rows = []
    for row in predict["rows"]:
        if row["measured_iteration_time_s"] is None:
            continue
        rows.append({"gpu": row["gpu"], "model": row["model"],
                     "checkpointed": row["activation_checkpointing"],
                     "measured": row["measured_iteration_time_s"],
                     "predicted": row["predicted_iteration_time_s"],
                     "by_model": by_line[row["line"]]["by_model_iteration_time_s"],
                     "memory": row["predicted_peak_memory_bytes"] / row["gpu_memory_bytes"]})
    figure, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    scatter(axes[0], rows, "predicted", "fitted constants (all runs)")
    scatter(axes[1], rows, "by_model", "leave one model size out")
    axes[0].legend(fontsize=7, loc="upper left")
    colours = plt.get_cmap("tab10")
    for index, gpu in enumerate(GPUS):
        chosen = [r for r in rows if r["gpu"] == gpu]
        x = [SIZES.index(r["model"]) + (index - 1) * 0.18 for r in chosen]
        axes[2].scatter(x, [r["memory"] for r in chosen], s=18, alpha=0.8, color=colours(index),
                        label=gpu)
    axes[2].axhline(1.0, color="red", linewidth=1, label="the GPU's memory")
    axes[2].set_xticks(range(len(SIZES)))
    axes[2].set_xticklabels(SIZES)
    axes[2].set_ylim(0, 1.15)
    axes[2].set_xlabel("MPT model size")
    axes[2].set_ylabel("predicted peak memory / GPU memory")
    out_of_memory = sum(r["memory"] > 1 for r in rows)
    axes[2].set_title(f"will it fit? every run ran; osdp calls {out_of_memory} of {len(rows)} "
                      "out of memory", fontsize=10)
    axes[2].grid(True, alpha=0.3)
    axes[2].legend(fontsize=7, loc="lower right")
    figure.suptitle("osdp on MosaicML llm-foundry's published FSDP runs (fit part: 8-64 GPUs)",
                    fontsize=11)
    figure.tight_layout()
    figure.savefig(sys.argv[3], dpi=110)
    print(f"wrote {sys.argv[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
