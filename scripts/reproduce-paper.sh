#!/usr/bin/env bash
# Reproduces the OSDP paper's experiments (Jiang et al., IJCAI 2023) with osdp and writes
# docs/paper-reproduction.md: for each experiment the paper's published figure, osdp's under
# the paper and the extended cost models and in simulation, and why they differ; and its plots,
# docs/figures/*.png from osdp runs (data beside each as .json; drawn by plots/*.py).
#
#   scripts/reproduce-paper.sh [--quick] [--out FILE]
#
# --quick runs two scenarios only (the CTest test) and writes out/paper-reproduction-quick.md
# unless --out says otherwise: never the committed report, and no plots. OSDP names the osdp
# executable (default ./build/release/cli/osdp, built with the release preset when absent).
# Needs python3 (standard library only; the plots need matplotlib, in it or /usr/bin/python3,
# else they are skipped). Exits non-zero with the failing command when an osdp run fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

out=""
quick=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --out) [ $# -ge 2 ] || { echo "reproduce-paper: --out needs a file" >&2; exit 2; }
           out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce-paper: unknown argument '$1' (expected --quick, --out FILE)" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$out" ]; then
  if [ ${#quick[@]} -gt 0 ]; then out="out/paper-reproduction-quick.md"; else out="docs/paper-reproduction.md"; fi
fi

osdp="${OSDP:-./build/release/cli/osdp}"
if [ ! -x "$osdp" ]; then
  if [ -n "${OSDP:-}" ]; then
    echo "reproduce-paper: OSDP=$OSDP is not an executable" >&2; exit 2
  fi
  echo "reproduce-paper: $osdp not found; building it (cmake --preset release)" >&2
  cmake --preset release >&2
  cmake --build --preset release --target osdp -j "${OSDP_JOBS:-$(nproc)}" >&2
fi
command -v python3 >/dev/null || { echo "reproduce-paper: python3 is needed" >&2; exit 2; }

exec python3 "$root/scripts/paper_reproduction.py" --osdp "$osdp" --out "$out" "${quick[@]}"
