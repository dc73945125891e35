#!/usr/bin/env python3
"""Plot throughput against the per-GPU memory limit from `osdp sweep`'s sweep.csv.

Usage: throughput_vs_memory.py SWEEP_CSV [--out DIR] [--title TEXT]
Writes DIR/throughput_vs_memory.png and .svg (DIR defaults to the CSV's folder), each to a
temporary name first and renamed into place. Exit codes: 0 written, 2 bad input, 3 no matplotlib.
"""
import argparse
import csv
import io
import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_input_text  # noqa: E402

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
    "fsdp_block_ckpt": "FSDP, a unit per block + ckpt",
    "zero2_block": "ZeRO-2, a unit per block",
    "zero2_block_ckpt": "ZeRO-2, a unit per block + ckpt",
    "fsdp_min_params": "FSDP, size-based units",
    "fsdp_offload": "FSDP + CPU offload",
    "zero2_offload": "ZeRO-2 + CPU offload (ZeRO-Offload)",
    # `osdp sweep --tp/--pp/--schedule`: the 3D strategies (search/layout_search.hpp)
    "3d_osdp": "3D + OSDP",
    "megatron_tp": "Megatron TP + DP",
    "gpipe": "GPipe + DP",
    "deepspeed_3d": "DeepSpeed 3D (ZeRO-1)",
    "fsdp_pp": "FSDP + PP (torchtitan)",
}
SUFFIX = "_throughput_samples_per_s"
# One colour a family (tab20's dark shade for the plain strategy, its light shade for the
# checkpointed one), a line style a variant: seventeen curves stay apart, where the default cycle
# of ten colours gave DDP and FSDP's size-based units one orange.
STRATEGY_STYLES = {
    "osdp": (0, "-", "o"),
    "ddp": (2, "-", "."),
    "ddp_ckpt": (3, "--", "."),
    "fsdp": (4, "-", "."),
    "fsdp_ckpt": (5, "--", "."),
    "fsdp_ckpt_fairscale": (14, "-.", "."),
    "zero2": (6, "-", "."),
    "zero2_ckpt": (7, "--", "."),
    "zero1": (8, "-", "."),
    "zero1_ckpt": (9, "--", "."),
    "fsdp_block": (10, ":", "s"),
    "fsdp_block_ckpt": (11, (0, (1, 3)), "s"),
    "zero2_block": (12, ":", "s"),
    "zero2_block_ckpt": (13, ":", "s"),
    "fsdp_min_params": (15, ":", "D"),
    "fsdp_offload": (18, "-.", "v"),
    "zero2_offload": (16, "-.", "v"),
    "3d_osdp": (0, "-", "o"),
    "megatron_tp": (2, "-", "^"),
    "gpipe": (6, "--", "s"),
    "deepspeed_3d": (8, "-.", "D"),
    "fsdp_pp": (4, ":", "v"),
}


def read_series(path):
    """Returns (limits in GiB, {strategy: [throughput or None]}) in column order."""
    rows = list(csv.DictReader(io.StringIO(read_input_text(path))))
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
    figure, axes = pyplot.subplots(figsize=(10, 5.2))
    palette = pyplot.get_cmap("tab20").colors
    unknown = 0  # strategies without a style (a newer osdp): colours tab20 leaves unused
    for name, values in series.items():
        points = [(x, y) for x, y in zip(limits, values) if y is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        if name in STRATEGY_STYLES:
            colour, linestyle, marker = STRATEGY_STYLES[name]
        else:
            colour, linestyle, marker = (12 + 2 * unknown) % 20, "-", "x"
            unknown += 1
        is_osdp = name in ("osdp", "3d_osdp")
        axes.plot(xs, ys, color=palette[colour], linestyle=linestyle, marker=marker,
                  markersize=6 if is_osdp else 4, linewidth=2.5 if is_osdp else 1.3,
                  label=STRATEGY_LABELS.get(name, name), zorder=3 if is_osdp else 2)
    axes.set_xlabel("memory limit per GPU (GiB)")
    axes.set_ylabel("throughput (samples/s, all GPUs)")
    axes.set_title(textwrap.fill(title, 70), fontsize="medium")
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
    # Ctrl-C reaches the plot too (`osdp sweep` forwards it): end quietly, as osdp reports it.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
