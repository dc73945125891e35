#!/usr/bin/env bash
# The README's first command: installs the Debian packages that are missing, builds `osdp`
# (release preset) and runs the default what-if study, scenarios/default.json: the OSDP plan
# against DDP / FSDP / ZeRO-2 at 8 GiB per GPU, then throughput against the memory limit from
# 4 GiB to 24 GiB, written to out/default/ (sweep.csv, throughput_vs_memory.png and .svg), and
# the teaching page of the same study, out/default/report/index.html (open it in a browser).
# OSDP_JOBS sets the build parallelism (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OSDP_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target osdp -j "$jobs"

osdp=./build/release/cli/osdp
"$osdp" plan scenarios/default.json
echo
"$osdp" sweep scenarios/default.json --memory-limits 4GiB:24GiB:1GiB --out out/default
echo
"$osdp" report scenarios/default.json --out out/default/report
