#!/usr/bin/env python3
"""Plot throughput against the per-GPU memory limit from `osdp sweep`'s sweep.csv.

Usage: throughput_vs_memory.py SWEEP_CSV [--out DIR] [--title TEXT]
Writes DIR/throughput_vs_memory.png and .svg (DIR defaults to the CSV's folder), each to a
temporary name first and renamed into place. Exit codes: 0 written, 2 bad input, 3 no matplotlib.
"""
import argparse
import csv
import os
import sys

STRATEGY_LABELS = {
    "osdp": "OSDP",
    "ddp": "DDP",
    "fsdp": "FSDP",
    "zero2": "ZeRO-2",
    "ddp_ckpt": "DDP + ckpt",
    "fsdp_ckpt": "FSDP + ckpt",
    "zero2_ckpt": "ZeRO-2 + ckpt",
    "zero1": "ZeRO-1",
    "zero1_ckpt": "ZeRO-1 + ckpt",
    "fsdp_ckpt_fairscale": "FSDP + ckpt (FairScale)",
    "fsdp_block": "FSDP, a unit per block",
    "fsdp_min_params": "FSDP, size-based units",
    "fsdp_offload": "FSDP + CPU offload",
    "zero2_offload": "ZeRO-2 + CPU offload (ZeRO-Offload)",
}
SUFFIX = "_throughput_samples_per_s"


def read_series(path):
    """Returns (limits in GiB, {strategy: [throughput or None]}) in column order."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or "memory_limit_GiB" not in rows[0]:
        raise ValueError(f"{path}: expected a sweep.csv written by `osdp sweep`")
    strategies = [key[: -len(SUFFIX)] for key in rows[0] if key.endswith(SUFFIX)]
    limits = [float(row["memory_limit_GiB"]) for row in rows]
    series = {
        name: [float(row[name + SUFFIX]) if row[name + SUFFIX] else None for row in rows]
        for name in strategies
    }
    return limits, series


def save_atomically(figure, path):
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".tmp.{name}.{os.getpid()}")
    try:
        figure.savefig(temporary, format=os.path.splitext(path)[1][1:], dpi=150)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def plot(limits, series, title, out_dir, pyplot):
    figure, axes = pyplot.subplots(figsize=(9, 4.8))
    for name, values in series.items():
        points = [(x, y) for x, y in zip(limits, values) if y is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        is_osdp = name == "osdp"
        axes.plot(xs, ys, marker="o" if is_osdp else ".", linewidth=2.5 if is_osdp else 1.2,
                  linestyle="-" if is_osdp or "ckpt" not in name else "--",
                  label=STRATEGY_LABELS.get(name, name), zorder=3 if is_osdp else 2)
    axes.set_xlabel("memory limit per GPU (GiB)")
    axes.set_ylabel("throughput (samples/s, all GPUs)")
    axes.set_title(title, fontsize="medium")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", title="no point: out of memory", title_fontsize="small",
                loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    for extension in ("png", "svg"):
        save_atomically(figure, os.path.join(out_dir, f"throughput_vs_memory.{extension}"))
    pyplot.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--out", help="output folder (default: the CSV's folder)")
    parser.add_argument("--title", default="Throughput vs memory limit")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        print("throughput_vs_memory.py: matplotlib is not installed", file=sys.stderr)
        return 3
    try:
        limits, series = read_series(args.csv)
    except (OSError, ValueError, KeyError) as error:
        print(f"throughput_vs_memory.py: {error}", file=sys.stderr)
        return 2
    out_dir = args.out or os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out_dir, exist_ok=True)
    plot(limits, series, args.title, out_dir, pyplot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
