#!/usr/bin/env bash
# scripts/gpu-check.sh without a GPU: its dry run prints the configure flags, the targets and the
# calibrate and validate commands it would run; bad arguments exit 2 with a message; the carry
# check fails (exit 1) on a missing, incomplete or oversized carry and passes on a complete one.
#   tests/scripts/gpu_check_test.sh SOURCE_DIR
set -uo pipefail
script="$1/scripts/gpu-check.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
checks=0
unset OUT  # the GPU machine sets it; each check below says where the results go

# expect NAME CODE PATTERN... -- ARGS...: runs the script, wants exit CODE and every (fixed)
# PATTERN in its output (stdout and stderr together).
expect() {
  local name="$1" code="$2"
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do
    patterns+=("$1")
    shift
  done
  shift
  local output status
  output="$("$script" "$@" 2>&1)"
  status=$?
  checks=$((checks + 1))
  local ok=1
  if [ "$status" != "$code" ]; then ok=0; fi
  local pattern
  for pattern in "${patterns[@]}"; do
    grep -qF -- "$pattern" <<<"$output" || { ok=0; echo "  lacks: $pattern"; }
  done
  if [ "$ok" = 1 ]; then
    echo "ok: $name"
  else
    echo "FAILED: $name (exit $status, expected $code): gpu-check.sh $*"
    echo "$output" | sed 's/^/  | /'
    failures=$((failures + 1))
  fi
}

out="$work/out"
expect "the dry run prints the GPU build, calibrate and validate" 0 \
  "-DOSDP_WITH_CUDA=ON" "-DOSDP_WITH_SIM=OFF" "-DOSDP_HEADER_ONLY_DEPS=ON" \
  "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc" "-DCMAKE_BUILD_TYPE=Release" \
  "/.gpu-carry/usr/share/cmake/nlohmann_json" "/.gpu-carry/usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0" \
  "--target osdp osdp-runtime -j 16" \
  "cli/osdp calibrate --device cuda --ranks 1 --model scenarios/h100-1gpu.json --out $out/h100-cluster.json" \
  "cli/osdp validate scenarios/h100-1gpu.json --cluster $out/h100-cluster.json --strategies ddp,ddp+ckpt --batch 1 --out $out/validate-b1" \
  "--batch 2 " "--batch 4 " "--batch 8 --out $out/validate-b8" "$out/summary.txt" \
  -- --dry-run --jobs 16 --out "$out"
expect "without \$OUT nor --out: out/gpu-check" 0 "/out/gpu-check/validate-b4" \
  -- --dry-run --batches 4
OUT="$work/from-env" expect "\$OUT is where the results go (set)" 0 \
  "--out $work/from-env/validate-b4" -- --dry-run --batches 4
expect "the CPU mode's dry run: no CUDA, its own build folder" 0 "-DOSDP_WITH_CUDA=OFF" \
  "/build/gpu-cpu" "--target osdp osdp-runtime" "calibrate --device cuda exits 2" \
  -- --dry-run --cpu
expect "--help" 0 "scripts/gpu-check.sh --prepare-carry" -- --help
expect "an unknown argument exits 2" 2 'unknown argument "--bogus"' "usage:" -- --bogus
expect "--jobs needs a number" 2 '--jobs "many"' -- --jobs many --dry-run
expect "--jobs needs a value" 2 "--jobs needs a value" -- --dry-run --jobs
expect "--batches 0 exits 2" 2 '--batches "0"' -- --dry-run --batches 0
expect "--batches 1,,2 exits 2" 2 '--batches "1,,2"' -- --dry-run --batches 1,,2
expect "two modes exit 2" 2 "exclude each other" -- --cpu --prepare-carry
expect "build/release is not ours" 2 "the release and debug presets own that folder" \
  -- --dry-run --build-dir build/release

# The carry check: missing, incomplete, oversized, complete.
expect "no carry folder" 1 "no carry folder" -- --check-carry --carry "$work/none"
carry="$work/carry"
mkdir -p "$carry"
expect "an empty carry lacks its files" 1 "carry lacks usr/include/fmt/format.h" \
  -- --check-carry --carry "$carry"
for file in usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake usr/include/nlohmann/json.hpp \
  usr/share/cmake/CLI11/CLI11Config.cmake usr/include/CLI/CLI.hpp usr/include/fmt/format.h \
  usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0/BoostConfig.cmake \
  usr/lib/x86_64-linux-gnu/cmake/boost_headers-1.74.0/boost_headers-config.cmake \
  usr/include/boost/graph/adjacency_list.hpp usr/include/boost/graph/topological_sort.hpp MANIFEST; do
  mkdir -p "$carry/$(dirname "$file")"
  echo "// $file" >"$carry/$file"
done
expect "a complete carry passes and says its size" 0 "of at most 67108864 (64 MiB)" \
  -- --check-carry --carry "$carry"
truncate -s 65M "$carry/usr/include/padding"  # sparse: 65 MiB apparent, no disk
expect "a carry over 64 MiB fails" 1 "carry over the limit" -- --check-carry --carry "$carry"

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" = 0 ]
