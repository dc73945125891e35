#!/usr/bin/env bash
# Regenerates every osdp output shown in README.md and docs/*.md (the blocks between
# <!-- osdp-output: COMMAND --> and <!-- end-osdp-output -->) from the current build, then
# checks the docs' relative links. Run it after a change that moves a shown figure; the CTest
# test "docs: every shown osdp output matches the current build" fails until you do.
#   OSDP   the osdp binary (default: build/release/cli/osdp; built when missing)
#   scripts/update-docs.sh [FILE.md ...]
set -euo pipefail
cd "$(dirname "$0")/.."
osdp="${OSDP:-build/release/cli/osdp}"
if [ ! -x "$osdp" ]; then
  cmake --preset release
  cmake --build --preset release --target osdp -j "${OSDP_JOBS:-$(nproc)}"
fi
python3 scripts/doc_outputs.py --osdp "$osdp" --write "$@"
python3 scripts/check_doc_links.py
