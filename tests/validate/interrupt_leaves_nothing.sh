#!/bin/sh
# SIGINT to `osdp validate` mid-run (to osdp alone, as `kill -INT` does, not the terminal's whole
# process group): it must exit 130 within seconds, with no runtime or rank process and no
# temporary file left behind.
#   interrupt_leaves_nothing.sh OSDP SCENARIO
set -u
osdp="$1"
scenario="$2"
TMPDIR="$(mktemp -d)"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

"$osdp" validate "$scenario" --strategies ddp,fsdp --ranks 2 >/dev/null 2>"$TMPDIR/../osdp-interrupt-$$.err" &
pid=$!
# Wait until the ranks run (their file store appears), at most 60 s.
waited=0
until find "$TMPDIR" -name store 2>/dev/null | grep -q .; do
  sleep 0.2
  waited=$((waited + 1))
  if [ "$waited" -gt 300 ]; then
    echo "the ranks never started"
    kill -9 "$pid" 2>/dev/null
    exit 1
  fi
done
kill -INT "$pid"
start=$(date +%s)
wait "$pid"
code=$?
elapsed=$(( $(date +%s) - start ))
cat "$TMPDIR/../osdp-interrupt-$$.err"
rm -f "$TMPDIR/../osdp-interrupt-$$.err"
status=0
if [ "$code" -ne 130 ]; then
  echo "exit code $code, expected 130"
  status=1
fi
if [ "$elapsed" -gt 10 ]; then
  echo "took ${elapsed} s to stop"
  status=1
fi
# Every process of the run had the request's path (under TMPDIR) on its command line.
if pgrep -f "$TMPDIR" >/dev/null; then
  echo "processes left:"
  pgrep -af "$TMPDIR"
  pkill -9 -f "$TMPDIR"
  status=1
fi
left=$(find "$TMPDIR" -mindepth 1 | head -n 5)
if [ -n "$left" ]; then
  echo "temporary files left:"
  echo "$left"
  status=1
fi
exit $status
