#!/usr/bin/env python3
"""Checks that a quick paper-reproduction report agrees with the committed one.

Usage: check_paper_report.py QUICK.md COMMITTED.md

Every table row of the quick report that names a scenario (a row starting with "| `") must be a
row of the committed report, verbatim: the quick run recomputes those rows from the current
build, so a committed report that the code no longer produces fails (regenerate it with
scripts/reproduce-paper.sh).
"""
import sys


def scenario_rows(path):
    with open(path) as handle:
        return [line.rstrip("\n") for line in handle if line.startswith("| `")]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    quick, committed = sys.argv[1], sys.argv[2]
    rows = scenario_rows(quick)
    known = set(scenario_rows(committed))
    stale = [row for row in rows if row not in known]
    if not rows:
        print("check_paper_report: %s has no scenario rows" % quick, file=sys.stderr)
        return 1
    if stale:
        print("check_paper_report: %d of %d rows of %s are not in %s (regenerate it with "
              "scripts/reproduce-paper.sh):" % (len(stale), len(rows), quick, committed),
              file=sys.stderr)
        for row in stale:
            print("  " + row, file=sys.stderr)
        return 1
    print("check_paper_report: all %d scenario rows of the quick report are in %s"
          % (len(rows), committed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
