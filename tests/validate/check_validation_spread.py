#!/usr/bin/env python3
"""plots/validation_spread.py draws the committed runs (plots/measurements/draw-figures.sh: the
same pictures as plots/figures holds), and refuses what it cannot draw with exit code 2 and no
figure.  Usage: check_validation_spread.py SOURCE_DIR WORK_DIR"""
import glob
import json
import os
import subprocess
import sys

source, work = sys.argv[1], sys.argv[2]
script = os.path.join(source, "plots", "validation_spread.py")
runs = sorted(glob.glob(os.path.join(source, "plots", "measurements",
                                     "validate-4ranks-2026-11-29", "*.json")))
assert len(runs) == 9, runs
arguments = ["%s=%s" % (os.path.basename(path).split("-run")[0], path) for path in runs]
out = os.path.join(work, "spread.png")
if os.path.exists(out):
    os.remove(out)
done = subprocess.run([sys.executable, script, out] + arguments, capture_output=True, text=True)
assert done.returncode in (0, 3), done.stderr  # 3: no matplotlib on this machine
if done.returncode == 0:
    with open(out, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"

# The committed figures are what the committed runs draw: the same picture size (their bytes
# match where matplotlib's version is the one that drew them; another version may differ in
# metadata or anti-aliasing).
figures = os.path.join(work, "figures")
done = subprocess.run(["bash", os.path.join(source, "plots", "measurements", "draw-figures.sh"),
                       figures], capture_output=True, text=True)
assert done.returncode in (0, 3), done.stderr
if done.returncode == 0:
    for name in ("validate-4ranks-spread.png", "validate-3d-2ranks-spread.png",
                 "unseen-2ranks-spread.png", "fidelity-history.png"):
        with open(os.path.join(figures, name), "rb") as drawn, \
                open(os.path.join(source, "plots", "figures", name), "rb") as committed:
            # IHDR: width and height, big-endian, at bytes 16-24 of a PNG.
            assert drawn.read(24)[16:] == committed.read(24)[16:], "%s: another size" % name

# Every run's plans carry what the plot reads, and the time errors are the runs' own.
runs += sorted(glob.glob(os.path.join(source, "plots", "measurements",
                                      "fidelity-2ranks-2026-11-29", "*.json")))
for path in runs:
    with open(path) as handle:
        document = json.load(handle)
    errors = [abs(plan["time_error_percent"]) for plan in document["plans"]]
    assert abs(max(errors) - document["max_abs_time_error_percent"]) < 1e-9, path

bad_out = os.path.join(work, "bad.png")
not_validate = os.path.join(work, "not-validate.json")
with open(not_validate, "w") as handle:
    json.dump({"plans": []}, handle)
for bad in (["no-equals-sign"], ["label=" + os.path.join(work, "missing.json")],
            ["label=" + not_validate]):
    done = subprocess.run([sys.executable, script, bad_out] + bad, capture_output=True, text=True)
    assert done.returncode == 2, (bad, done.returncode, done.stderr)
    assert "error" in done.stderr, done.stderr
    assert not os.path.exists(bad_out), bad

# plots/fidelity_history.py: a round of one file prints that file's own median and largest
# error; files of one SETTING@ROUND pool; bad input is refused with exit 2 and no figure.
history = os.path.join(source, "plots", "fidelity_history.py")
kept = os.path.join(source, "plots", "measurements", "fidelity-2ranks-2026-11-29")
layouts = os.path.join(kept, "round1-validate-3d.json")
unseen = [os.path.join(kept, "round1-unseen-%s.json" % model) for model in ("deep", "wide", "long")]
history_out = os.path.join(work, "history.png")
if os.path.exists(history_out):
    os.remove(history_out)
done = subprocess.run([sys.executable, history, history_out, "layouts@r1=" + layouts]
                      + ["unseen@r1=" + path for path in unseen], capture_output=True, text=True)
assert done.returncode in (0, 3), done.stderr
if done.returncode == 0:
    with open(layouts) as handle:
        document = json.load(handle)
    line = next(l for l in done.stdout.splitlines() if l.startswith("layouts, r1:"))
    assert "median |time error| %.1f %%" % document["median_abs_time_error_percent"] in line, line
    assert "largest %.1f %%" % document["max_abs_time_error_percent"] in line, line
    pooled = next(l for l in done.stdout.splitlines() if l.startswith("unseen, r1:"))
    plans = sum(len(json.load(open(path))["plans"]) for path in unseen)
    assert pooled.startswith("unseen, r1: %d plans" % plans), pooled
    with open(history_out, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
# A FIFO would block a reader forever, /dev/zero never ends: both refused before reading.
fifo = os.path.join(work, "fifo")
if not os.path.exists(fifo):
    os.mkfifo(fifo)
for bad in (["s@r=" + fifo], ["s@r=/dev/zero"], ["no-at-sign=" + layouts], ["setting@=" + layouts],
            ["s@r=" + os.path.join(work, "missing.json")], ["s@r=" + not_validate]):
    done = subprocess.run([sys.executable, history, bad_out] + bad, capture_output=True, text=True)
    assert done.returncode == 2, (bad, done.returncode, done.stderr)
    assert "error" in done.stderr, done.stderr
    assert not os.path.exists(bad_out), bad
print("validation spread ok")
