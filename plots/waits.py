#!/usr/bin/env python3
"""Where each rank's compute waited, collective by collective, in one or more traces: a measured
step (`osdp validate --out DIR`: DIR/traces/PLAN.measured.json) beside the simulated one
(DIR/traces/PLAN.simulated.json, or `osdp simulate --trace`).

Usage: waits.py TRACE_JSON [TRACE_JSON ...] [--ranks 0,1] [--csv FILE]
Reads the "wait" events of each trace's compute-waits track and prints, per collective (what
the wait was for: "all-gather layer0.mlp", "reduce-scatter head"; for a pipeline layout its
cause: "receive", "send", "tensor-parallel", "data-parallel"), each rank's total wait in
milliseconds and how many waits made it, one column per trace and rank (a layout's simulated
trace, the 3D model's timeline, has a column per stage and only its waits for the neighbouring
stages: the tensor-parallel sums are inside its passes); the last row the totals, which are
each rank's exposed communication in that step. With --csv the same rows go
to FILE (written to a temporary name first and renamed into place).
Exit codes: 0 printed, 2 bad input.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_support import read_input_json  # noqa: E402


def read_waits(path):
    """({(rank, collective): [total seconds, count]} of a Chrome trace's wait events,
    {rank: its process's name}): a layout's simulated trace has a process per stage."""
    trace = read_input_json(path)
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError(f"{path}: expected a Chrome trace with \"traceEvents\"")
    waits = {}
    names = {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names[event["pid"]] = str((event.get("args") or {}).get("name", event["pid"]))
        if event.get("ph") != "X" or event.get("cat") != "wait":
            continue
        args = event.get("args") or {}
        collective = args.get("for") or event.get("name", "wait")
        seconds = float(args.get("waited_s", event.get("dur", 0) / 1e6))
        entry = waits.setdefault((event["pid"], collective), [0.0, 0])
        entry[0] += seconds
        entry[1] += 1
    return waits, names


def process_label(names, rank):
    """"rank 3", or a layout's "stage 1" (from "1 x 2 x 1, stage 1")."""
    name = names.get(rank, "")
    tail = name.rsplit(", ", 1)[-1]
    return tail if tail.startswith(("rank ", "stage ")) else f"rank {rank}"


def parse_ranks(text, available):
    if text is None:
        return sorted(available)
    try:
        ranks = [int(item) for item in text.split(",") if item]
    except ValueError:
        raise ValueError(f"--ranks: expected a list of rank numbers like 0,1, not {text!r}")
    if not ranks:
        raise ValueError(f"--ranks: no rank in {text!r}")
    return ranks


def collective_order(name):
    """Model order for the operators (embedding, layers, head), then the others by name."""
    kind, _, unit = name.partition(" ")
    if unit == "embedding":
        position = (0, 0)
    elif unit.startswith("layer"):
        digits = "".join(c for c in unit[5:].split(".")[0] if c.isdigit())
        position = (1, int(digits) if digits else 0)
    elif unit == "head":
        position = (2, 0)
    else:
        position = (3, 0)
    return (position, unit, kind)


def table_rows(traces, ranks):
    """Columns: each trace's ranks (or stages) among `ranks` that are in it."""
    columns = []
    for label, (waits, names) in traces:
        present = {rank for (rank, _) in waits} | set(names)
        columns += [(label, waits, rank, process_label(names, rank))
                    for rank in ranks if rank in present]
    collectives = sorted({c for _, (waits, _) in traces for (_, c) in waits}, key=collective_order)
    rows = []
    for collective in collectives + ["total"]:
        row = [collective]
        for _, waits, rank, _ in columns:
            if collective == "total":
                mine = [v for (r, _), v in waits.items() if r == rank]
                row.append((sum(v[0] for v in mine), sum(v[1] for v in mine)))
            else:
                row.append(tuple(waits.get((rank, collective), (0.0, 0))))
        rows.append(row)
    return [(label, rank, name) for label, _, rank, name in columns], rows


def short_label(label):
    """"zdp+ckpt.measured" -> "measured": the plan is the table's title."""
    for kind in ("measured", "simulated"):
        if label.endswith("." + kind):
            return kind
    return label[-14:]


def print_table(columns, rows):
    width = max(len(row[0]) for row in rows)
    plans = sorted({label.rsplit(".", 1)[0] for label, _, _ in columns})
    print(f"compute waits per collective, ms (count), of {', '.join(plans)}")
    print(f"{'':<{width}} " + " ".join(f"{short_label(label):>14}" for label, _, _ in columns))
    print(f"{'':<{width}} " + " ".join(f"{name:>14}" for _, _, name in columns))
    for row in rows:
        cells = " ".join(f"{1e3 * seconds:>8.2f} ({count:>3})" if count else f"{'-':>14}"
                         for seconds, count in row[1:])
        print(f"{row[0]:<{width}} {cells}")


def write_csv(path, columns, rows):
    if os.path.isdir(path) or path.endswith("/"):
        raise OSError(f"--csv {path}: a directory, not a file to write")
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        write_rows(temporary, columns, rows)
        os.replace(temporary, path)
    except OSError:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def write_rows(temporary, columns, rows):
    with open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        header = ["collective"]
        for label, _, name in columns:
            header += [f"{label} {name} waited_s", f"{label} {name} waits"]
        writer.writerow(header)
        for row in rows:
            cells = [row[0]]
            for seconds, count in row[1:]:
                cells += [f"{seconds:.9f}", count]
            writer.writerow(cells)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", metavar="trace")
    parser.add_argument("--ranks", help="ranks to show, e.g. 0,1 (default: every rank that waited)")
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    args = parser.parse_args()
    try:
        traces = [(os.path.splitext(os.path.basename(path))[0], read_waits(path))
                  for path in args.traces]
        available = {rank for _, (waits, _) in traces for (rank, _) in waits}
        ranks = parse_ranks(args.ranks, available)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"waits.py: error: {error}", file=sys.stderr)
        return 2
    if not available:
        print("waits.py: error: no trace has compute waits (a \"wait\" event on a compute-waits "
              "track)", file=sys.stderr)
        return 2
    columns, rows = table_rows(traces, ranks)
    print_table(columns, rows)
    if args.csv:
        try:
            write_csv(args.csv, columns, rows)
        except OSError as error:
            print(f"waits.py: error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
