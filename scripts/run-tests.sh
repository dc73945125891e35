#!/usr/bin/env bash
# The README's second command: installs the Debian packages that are missing, builds
# everything once (release preset) and runs the whole test suite with ctest in parallel.
# OSDP_JOBS sets the build and test parallelism (default: all cores; CI uses 2).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OSDP_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
