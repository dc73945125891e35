#!/usr/bin/env python3
"""Predicted against measured iteration time for a measured table, one point per row.

Usage: measured_table_fit.py PREDICT_JSON OUTPUT_PNG [CV_JSON]
PREDICT_JSON is what `osdp predict SCENARIO --table TABLE --json` prints. CV_JSON, optional, is
what `osdp fit ... --json` prints (its cross-validated predictions), drawn as a second
panel when given. Data-parallel tables: colour is the micro-batch size, marker the number of
GPUs. Tables with tensor or pipeline parallelism: colour is the layout (tensor, pipeline, both),
marker one server or several.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = {2: "o", 4: "s", 8: "^"}


def several_servers(row):
    """Whether a vTrain row spans more than one 8-GPU server."""
    return row["gpus"] > 8


def layout_of(row):
    tensor = row.get("tensor_parallelism", 1) > 1
    pipeline = row.get("pipeline_parallelism", 1) > 1
    return ("tensor + pipeline" if tensor and pipeline else
            "tensor" if tensor else "pipeline" if pipeline else "data only")


def scatter_3d(axis, rows):
    layouts = ["data only", "tensor", "pipeline", "tensor + pipeline"]
    colours = plt.get_cmap("tab10")
    for index, layout in enumerate(layouts):
        for several, marker, where in ((False, "o", "one server"), (True, "^", "several servers")):
            chosen = [r for r in rows if layout_of(r) == layout and several_servers(r) == several]
            if not chosen:
                continue
            axis.scatter([r["measured_iteration_time_s"] * 1e3 for r in chosen],
                         [r["predicted_iteration_time_s"] * 1e3 for r in chosen], marker=marker,
                         color=colours(index), s=14 if not several else 30, alpha=0.7,
                         label=f"{layout}, {where}")


def panel(axis, document, title):
    rows = [r for r in document["rows"] if r.get("measured_iteration_time_s") is not None]
    if any(layout_of(r) != "data only" for r in rows):
        scatter_3d(axis, rows)
        return finish(axis, document, rows, title)
    micro_batches = sorted({r["micro_batch"] for r in rows})
    colours = plt.get_cmap("viridis", max(len(micro_batches), 2))
    for gpus in sorted({r["gpus"] for r in rows}):
        for index, micro in enumerate(micro_batches):
            chosen = [r for r in rows if r["gpus"] == gpus and r["micro_batch"] == micro]
            if not chosen:
                continue
            axis.scatter([r["measured_iteration_time_s"] * 1e3 for r in chosen],
                         [r["predicted_iteration_time_s"] * 1e3 for r in chosen],
                         marker=MARKERS.get(gpus, "x"), color=colours(index), s=22,
                         label=f"{gpus} GPUs, micro-batch {micro}")
    finish(axis, document, rows, title)


def finish(axis, document, rows, title):
    low = min(min(r["measured_iteration_time_s"], r["predicted_iteration_time_s"]) for r in rows)
    high = max(max(r["measured_iteration_time_s"], r["predicted_iteration_time_s"]) for r in rows)
    line = [low * 1e3 * 0.9, high * 1e3 * 1.1]
    axis.plot(line, line, color="black", linewidth=0.8)
    axis.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line], color="grey",
                      alpha=0.15, label="within 10 %")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("measured iteration time (ms)")
    axis.set_ylabel("predicted iteration time (ms)")
    heading = (f"{title}: MAPE {document['mape_percent']:.2f} %, "
               f"median {document['median_abs_error_percent']:.2f} %")
    # Rows on one server and across several apart, when the table has both.
    kinds = []
    for name, several in (("one server", False), ("several servers", True)):
        errors = [abs(r["error_percent"]) for r in rows
                  if "error_percent" in r and several_servers(r) == several]
        if errors:
            kinds.append(f"{name} {sum(errors) / len(errors):.2f} % ({len(errors)})")
    if len(kinds) == 2:
        heading += "\n" + ", ".join(kinds)
    axis.set_title(heading, fontsize=10)
    axis.grid(True, which="both", linewidth=0.3)


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    documents = [(argv[1], "osdp predict")]
    if len(argv) == 4:
        documents.append((argv[3], "cross-validated (model size left out)"))
    figure, axes = plt.subplots(1, len(documents), figsize=(6.5 * len(documents), 5.5),
                                squeeze=False)
    for axis, (path, title) in zip(axes[0], documents):
        with open(path) as handle:
            document = json.load(handle)
        panel(axis, document.get("cross_validated", document), title)
    axes[0][0].legend(fontsize=6, loc="upper left")
    figure.tight_layout()
    figure.savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
