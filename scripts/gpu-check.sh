#!/usr/bin/env bash
# The validator on a lent GPU machine in one command (issue 28): builds osdp and osdp-runtime
# with the runtime's CUDA + NCCL device path against the machine's own libtorch (the `python3`
# PyTorch's) and the dependencies' headers carried from Debian's packages, then calibrates the
# GPU's compute laws and validates scenarios/h100-1gpu.json (DDP with and without checkpointing,
# micro-batches 1 to 8, one rank), writing everything to $OUT. Tested here without a GPU; its
# first GPU runs (2026-11-27) and what they fixed are in docs/validator.md.
#
#   scripts/gpu-check.sh                  on the GPU machine: build, calibrate, validate
#   scripts/gpu-check.sh --prepare-carry  on this (Debian) machine first: apt-get download the
#                                         -dev packages into .gpu-carry/ (git-ignored), pruned
#   scripts/gpu-check.sh --check-carry    the carry's contents and size (at most 64 MiB)
#   scripts/gpu-check.sh --cpu            the same build against Debian's CPU libtorch, from the
#                                         carry, without CUDA, and a short CPU run of it
#   scripts/gpu-check.sh --dry-run        print the steps it would run, run nothing
#
# Options: --out DIR (default $OUT, else out/gpu-check), --build-dir DIR (default build/gpu, or
# build/gpu-cpu with --cpu), --carry DIR (default .gpu-carry), --jobs N (default: all cores),
# --batches LIST (micro-batches to validate, default 1,2,4,8), --help.
# Exit codes: 0 every step passed; 1 a step failed (its log is under the out folder); 2 bad
# arguments or a missing prerequisite named in the message.
#
# The GPU machine (one H100, 16 cores, CUDA 13 nvcc in /usr/local/cuda, PyTorch with its C++
# headers and CMake config, CMake, ninja, no network) has none of our Debian packages: what the
# build needs from them is the carry folder, sent with the working tree. Only headers are used
# there (fmt header-only, Boost.Graph's header-only parts, nlohmann-json, CLI11), so no Debian
# library has to load on a system whose glibc may differ. Budget: the build at most 5 minutes on
# 16 cores, calibrate and validate at most 5 (steps are bounded by timeouts; validations of
# micro-batches that would start past the budget are skipped and said so).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

carry_limit_bytes=$((64 * 1024 * 1024))
scenario="scenarios/h100-1gpu.json"
strategies="ddp,ddp+ckpt"
build_timeout_s=420      # the build's budget is 300 s; the rest is room for a slow start
calibrate_timeout_s=180
run_budget_s=300         # calibrate + validate
# The Debian packages whose headers the build uses (their versions go into the carry's MANIFEST).
carry_packages=(nlohmann-json3-dev libcli11-dev libfmt-dev libboost1.74-dev)

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}

fail_usage() {
  echo "gpu-check: $1" >&2
  echo "gpu-check: usage: scripts/gpu-check.sh [--dry-run] [--cpu | --prepare-carry | --check-carry] [--out DIR] [--build-dir DIR] [--carry DIR] [--jobs N] [--batches 1,2,4,8]" >&2
  exit 2
}

mode=gpu
dry_run=0
out_dir="${OUT:-}"
build_dir=""
carry_dir=".gpu-carry"
jobs=""
batches="1,2,4,8"
set_mode() {
  [ "$mode" = gpu ] || fail_usage "$1 and --$mode exclude each other: pick one mode"
  mode="${1#--}"
}
need_value() {
  if [ $# -lt 2 ] || [ -z "$2" ] || [ "${2#--}" != "$2" ]; then fail_usage "$1 needs a value"; fi
}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --cpu | --prepare-carry | --check-carry) set_mode "$1" ;;
    --out) need_value "$@"; out_dir="$2"; shift ;;
    --build-dir) need_value "$@"; build_dir="$2"; shift ;;
    --carry) need_value "$@"; carry_dir="$2"; shift ;;
    --jobs) need_value "$@"; jobs="$2"; shift ;;
    --batches) need_value "$@"; batches="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) fail_usage "unknown argument \"$1\"" ;;
  esac
  shift
done
if [ -n "$jobs" ] && ! [[ "$jobs" =~ ^[1-9][0-9]{0,3}$ ]]; then
  fail_usage "--jobs \"$jobs\": expected a whole number of parallel jobs, 1 to 9999"
fi
jobs="${jobs:-$(nproc)}"
if ! [[ "$batches" =~ ^[1-9][0-9]{0,3}(,[1-9][0-9]{0,3})*$ ]]; then
  fail_usage "--batches \"$batches\": expected micro-batch sizes of at least 1, comma-separated (e.g. 1,2,4,8)"
fi
IFS=, read -r -a batch_list <<<"$batches"
case "$carry_dir" in /*) ;; *) carry_dir="$root/$carry_dir" ;; esac
if [ -z "$out_dir" ]; then out_dir="out/gpu-check"; fi
case "$out_dir" in /*) ;; *) out_dir="$root/$out_dir" ;; esac
if [ -z "$build_dir" ]; then
  if [ "$mode" = cpu ]; then build_dir="build/gpu-cpu"; else build_dir="build/gpu"; fi
fi
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
case "$build_dir/" in
  "$root/build/release/"* | "$root/build/debug/"*)
    fail_usage "--build-dir $build_dir: the release and debug presets own that folder; use another" ;;
esac

say() { echo "gpu-check: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# The carry: what the build needs from Debian's packages, as files under $carry_dir/usr.

carry_usr() { echo "$carry_dir/usr"; }
# Every file the build opens from the carry (the configure step's package files and one header
# of each library): a carry without one of them cannot build.
carry_required=(
  usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake
  usr/include/nlohmann/json.hpp
  usr/share/cmake/CLI11/CLI11Config.cmake
  usr/include/CLI/CLI.hpp
  usr/include/fmt/format.h
  usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0/BoostConfig.cmake
  usr/lib/x86_64-linux-gnu/cmake/boost_headers-1.74.0/boost_headers-config.cmake
  usr/include/boost/graph/adjacency_list.hpp
  usr/include/boost/graph/topological_sort.hpp
  MANIFEST
)

carry_size_bytes() { du -sb "$carry_dir" | cut -f1; }

# Prints the carry's size and fails (exit 1) when it is over the limit or lacks a file.
check_carry() {
  if [ ! -d "$carry_dir" ]; then
    say "no carry folder at $carry_dir: run scripts/gpu-check.sh --prepare-carry on a Debian machine first"
    return 1
  fi
  local size
  size="$(carry_size_bytes)"
  say "carry $carry_dir: $size bytes ($(awk -v b="$size" 'BEGIN{printf "%.1f", b / 1048576}') MiB) of at most $carry_limit_bytes (64 MiB)"
  if [ "$size" -gt "$carry_limit_bytes" ]; then
    say "carry over the limit: $size > $carry_limit_bytes bytes (what a run sends beside the working tree)"
    return 1
  fi
  local missing=0 file
  for file in "${carry_required[@]}"; do
    if [ ! -f "$carry_dir/$file" ]; then
      say "carry lacks $file (rerun --prepare-carry)"
      missing=1
    fi
  done
  return "$missing"
}

# The boost headers that osdp's sources include, closed over their own includes as the compiler
# resolves them (g++, and clang++ where installed: their config headers differ), plus all of
# boost/config (it picks headers by compiler and standard library, which differ on the GPU
# machine).
boost_closure() {
  local include_root="$1" list="$2"
  local probe
  probe="$(mktemp --suffix=.cpp)"
  grep -rhoE '^#include <boost/[^>]+>' "$root/model" "$root/search" "$root/validate" "$root/cli" |
    sort -u >"$probe"
  if [ ! -s "$probe" ]; then
    rm -f "$probe"
    return 0
  fi
  local compiler
  for compiler in g++ clang++; do
    command -v "$compiler" >/dev/null 2>&1 || continue
    "$compiler" -std=c++20 -M -isystem "$include_root" "$probe"
  done | tr ' \\' '\n\n' | awk -v prefix="$include_root/" \
    'index($0, prefix "boost/") == 1 { print substr($0, length(prefix) + 1) }' >>"$list"
  (cd "$include_root" && find boost/config -type f) >>"$list"
  rm -f "$probe"
  sort -u -o "$list" "$list"
}

prepare_carry() {
  command -v dpkg-deb >/dev/null || { say "--prepare-carry needs dpkg-deb (a Debian machine)"; exit 2; }
  if [ -e "$carry_dir" ] && [ ! -f "$carry_dir/MANIFEST" ] && [ -n "$(ls -A "$carry_dir")" ]; then
    say "--carry $carry_dir is a folder with other files (no MANIFEST): not replacing it"
    exit 2
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/debs" "$work/root"
  local package source manifest=()
  for package in "${carry_packages[@]}"; do
    # The package file from the registry; where that fails (no network, no apt lists), the
    # installed package's own files, the same version's.
    if (cd "$work/debs" && apt-get download -q "$package" >/dev/null 2>&1); then
      local deb
      deb="$(ls "$work/debs/${package}"_*.deb)"
      dpkg-deb -x "$deb" "$work/root"
      source="apt-get download $(basename "$deb")"
    elif dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      dpkg -L "$package" | while read -r path; do
        if [ -f "$path" ] && [ ! -L "$path" ]; then
          mkdir -p "$work/root$(dirname "$path")"
          cp -p "$path" "$work/root$path"
        elif [ -L "$path" ]; then
          mkdir -p "$work/root$(dirname "$path")"
          cp -P "$path" "$work/root$path"
        fi
      done
      source="installed files of $package $(dpkg-query -W -f='${Version}' "$package") (apt-get download failed)"
    else
      say "cannot get $package: apt-get download failed and it is not installed (run apt-get update?)"
      exit 1
    fi
    say "carry: $package from $source"
    manifest+=("$package: $source")
  done
  local from="$work/root/usr"
  rm -rf "$carry_dir"
  mkdir -p "$(carry_usr)/include" "$(carry_usr)/share/cmake" "$(carry_usr)/lib/x86_64-linux-gnu/cmake"
  # Header-only libraries whole (small); CMake package files as shipped (they locate their
  # headers relative to themselves).
  cp -a "$from/include/nlohmann" "$from/include/CLI" "$from/include/fmt" "$(carry_usr)/include/"
  cp -a "$from/share/cmake/nlohmann_json" "$from/share/cmake/CLI11" "$(carry_usr)/share/cmake/"
  cp -a "$from/lib/x86_64-linux-gnu/cmake/Boost-1.74.0" \
    "$from/lib/x86_64-linux-gnu/cmake/boost_headers-1.74.0" \
    "$(carry_usr)/lib/x86_64-linux-gnu/cmake/"
  # Boost: only the headers the build opens (all of Boost's are about 150 MiB).
  local list="$work/boost-headers.txt"
  : >"$list"
  boost_closure "$from/include" "$list"
  (cd "$from/include" && tar -cf - -T "$list") | (cd "$(carry_usr)/include" && tar -xf -)
  {
    echo "# What scripts/gpu-check.sh --prepare-carry put here ($(date -u +%Y-%m-%dT%H:%M:%SZ)):"
    printf '%s\n' "${manifest[@]}"
    echo "boost: $(wc -l <"$list") headers (those osdp includes, closed over their includes, and boost/config)"
  } >"$carry_dir/MANIFEST"
  check_carry
}

# ---------------------------------------------------------------------------------------------
# The build.

torch_prefix() {
  python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null
}

# NCCL's header and library: the pip package PyTorch loads, else beside the CUDA toolkit. The
# header must be the one PyTorch was built with: ProcessGroupNCCL::Options' layout follows the
# NCCL version the including file sees (a mismatch compiles and corrupts memory).
nccl_flags() {
  local nccl
  nccl="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
    local library
    library="$(ls "$nccl"/lib/libnccl.so* 2>/dev/null | head -n 1)"
    echo "-DNCCL_INCLUDE_DIR=$nccl/include -DNCCL_LIBRARY=$library"
  fi
}

configure_args() {
  local prefix="$1"
  local usr
  usr="$(carry_usr)"
  args=(-S "$root" -B "$build_dir" -G Ninja
    -DOSDP_WITH_SIM=OFF -DOSDP_BUILD_TESTS=OFF -DOSDP_BUILD_BENCH=OFF -DOSDP_WITH_VALIDATE=ON
    -DOSDP_HEADER_ONLY_DEPS=ON
    "-Dnlohmann_json_DIR=$usr/share/cmake/nlohmann_json"
    "-DCLI11_DIR=$usr/share/cmake/CLI11"
    "-DBoost_DIR=$usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0"
    "-DOSDP_FMT_INCLUDE_DIR=$usr/include")
  if [ "$mode" = cpu ]; then
    # Debian's CPU libtorch, found where it is installed; no optimisation (a quicker build: this
    # proves that the build works, it times nothing).
    args+=(-DCMAKE_BUILD_TYPE= -DOSDP_WITH_CUDA=OFF)
  else
    args+=(-DCMAKE_BUILD_TYPE=Release -DOSDP_WITH_CUDA=ON
      "-DCMAKE_PREFIX_PATH=$prefix"
      -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCUDAToolkit_ROOT=/usr/local/cuda
      -DCMAKE_CUDA_ARCHITECTURES=90)
    local extra
    extra="$(nccl_flags)"
    # shellcheck disable=SC2206
    [ -z "$extra" ] || args+=($extra)
  fi
}

print_command() {
  local word line=""
  for word in "$@"; do
    if [[ "$word" =~ [[:space:]\;\(\)\$] ]]; then line+=" '$word'"; else line+=" $word"; fi
  done
  echo "${line# }"
}

osdp_bin() { echo "$build_dir/cli/osdp"; }

# The commands, into the array `command_words`.
calibrate_command() {
  command_words=("$(osdp_bin)" calibrate --device cuda --ranks 1 --model "$scenario"
    --out "$out_dir/h100-cluster.json" --report "$out_dir/calibration-report.json")
}

# validate_command BATCH [CLUSTER]: without a cluster, the scenario's own (assumed) one.
validate_command() {
  local batch="$1" cluster="${2:-}"
  command_words=("$(osdp_bin)" validate "$scenario")
  [ -z "$cluster" ] || command_words+=(--cluster "$cluster")
  command_words+=(--strategies "$strategies" --batch "$batch" --out "$out_dir/validate-b$batch")
}

dry_run_report() {
  local prefix
  prefix="$(torch_prefix || true)"
  if [ -z "$prefix" ] && [ "$mode" = gpu ]; then
    prefix="<torch.utils.cmake_prefix_path of the GPU machine's python3: no torch here>"
  fi
  configure_args "$prefix"
  echo "gpu-check --dry-run ($mode mode): the steps, nothing run"
  echo "1. carry check: $carry_dir within $carry_limit_bytes bytes, with ${#carry_required[@]} required files"
  echo "2. configure: $(print_command cmake "${args[@]}")"
  [ "$mode" = gpu ] || build_timeout_s=3600
  echo "3. build (at most ${build_timeout_s} s; every failing file, not only the first): $(print_command cmake --build "$build_dir" --target osdp osdp-runtime -j "$jobs" -- -k 0)"
  if [ "$mode" = cpu ]; then
    echo "4. checks: osdp and osdp-runtime load no libfmt nor libboost; calibrate --device cuda exits 2 (no device path); a CPU validate of scenarios/local-cpu-tiny.json"
    return
  fi
  calibrate_command
  echo "4. calibrate (at most ${calibrate_timeout_s} s; one GPU, so no collectives): $(print_command "${command_words[@]}")"
  local batch
  for batch in "${batch_list[@]}"; do
    validate_command "$batch" "$out_dir/h100-cluster.json"
    echo "5. validate micro-batch $batch (while the $run_budget_s s budget lasts): $(print_command "${command_words[@]}")"
  done
  echo "6. summary: $out_dir/summary.txt (steps, times, exit codes; comparison tables) beside each step's log"
}

if [ "$dry_run" = 1 ]; then
  case "$mode" in
    gpu | cpu) dry_run_report; exit 0 ;;
    *) echo "gpu-check --dry-run --$mode: would $( [ "$mode" = prepare-carry ] && echo "apt-get download ${carry_packages[*]} into $carry_dir, prune it and check its size" || echo "check $carry_dir's files and size")"; exit 0 ;;
  esac
fi

case "$mode" in
  prepare-carry) prepare_carry; exit $? ;;
  check-carry) check_carry; exit $? ;;
esac

# ---------------------------------------------------------------------------------------------
# gpu and cpu modes: run the steps, each logged under $out_dir, with a summary.

mkdir -p "$out_dir" || fail_usage "--out $out_dir: cannot create it"
summary="$out_dir/summary.txt"
: >"$summary"
failed=0
note() { echo "$*" | tee -a "$summary" >&2; }

# run_step NAME TIMEOUT_S LOG COMMAND...: runs it with its output in LOG (and on the terminal),
# notes its time and exit code; a step past its time is interrupted (SIGINT, as Ctrl-C: osdp
# removes what it started) and killed 10 s later.
run_step() {
  local name="$1" limit_s="$2" log="$3"
  shift 3
  local start end code
  start="$(date +%s)"
  note "== $name: $(print_command "$@")"
  set +e
  timeout -s INT -k 10 "$limit_s" "$@" 2>&1 | tee "$log"
  code="${PIPESTATUS[0]}"
  set -e
  end="$(date +%s)"
  if [ "$code" = 124 ]; then
    note "   $name: stopped after ${limit_s} s (its budget); log $log"
  else
    note "   $name: exit $code after $((end - start)) s; log $log"
  fi
  [ "$code" = 0 ] || failed=1
  return "$code"
}

if ! check_carry; then exit 2; fi
for tool in cmake ninja; do
  command -v "$tool" >/dev/null || { say "$tool not found (the build needs CMake 3.25 or later and ninja)"; exit 2; }
done

prefix=""
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown) ($(git -C "$root" status --porcelain 2>/dev/null | wc -l) changed files)"
  echo "host: $(uname -srm), $(nproc) cores"
  echo "cmake: $(cmake --version | head -n 1); ninja $(ninja --version)"
  echo "c++: $(c++ --version 2>/dev/null | head -n 1)"
  echo "carry: $(carry_size_bytes) bytes; $(head -n 1 "$carry_dir/MANIFEST")"
  sed 1d "$carry_dir/MANIFEST" | sed 's/^/  /'
} >"$out_dir/environment.txt"
if [ "$mode" = gpu ]; then
  [ -x /usr/local/cuda/bin/nvcc ] || { say "no /usr/local/cuda/bin/nvcc: the GPU build needs the CUDA toolkit there"; exit 2; }
  prefix="$(torch_prefix)" || true
  if [ -z "$prefix" ]; then
    say "python3 has no torch: the GPU build needs PyTorch's CMake config (torch.utils.cmake_prefix_path)"
    exit 2
  fi
  {
    echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -n 1)"
    echo "torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())' 2>&1)"
    echo "torch cmake prefix: $prefix"
    echo "gloo headers: $(ls -d "$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')/include/gloo" 2>/dev/null || echo "none (the build has the NCCL backend only)")"
    echo "nccl: $(nccl_flags || true) (empty: beside the toolkit)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 || echo "nvidia-smi failed"
  } >>"$out_dir/environment.txt"
  # The arch list PyTorch's CMake config would otherwise detect by running a program.
  export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
fi
cat "$out_dir/environment.txt" >&2

configure_args "$prefix"
mkdir -p "$out_dir/logs"
# The CPU build on 2 shared cores takes minutes more than the GPU machine's 16: not bounded.
[ "$mode" = gpu ] || build_timeout_s=3600
run_step configure 300 "$out_dir/logs/configure.log" cmake "${args[@]}" || {
  note "configure failed: the package that was not found is named in $out_dir/logs/configure.log"
  exit 1
}
# Relinked every time (seconds): a build folder kept from an earlier run once kept binaries
# linked the old way.
rm -f "$(osdp_bin)" "$build_dir/cli/osdp-runtime"
run_step build "$build_timeout_s" "$out_dir/logs/build.log" \
  cmake --build "$build_dir" --target osdp osdp-runtime -j "$jobs" -- -k 0 || exit 1

osdp="$(osdp_bin)"
# PyTorch's pip libtorch exports copies of some libstdc++ symbols (std::filesystem's): a runtime
# that takes them from libtorch crashed in std::filesystem::remove_all (GPU runs of 2026-11-27).
# The GPU machine's compiler links libstdc++ statically, so whatever libtorch exports binds to
# libtorch however the libraries are ordered: the runtime removes folders with nftw and must not
# import remove_all at all.
runtime_binary="$build_dir/cli/osdp-runtime"
if nm -D --undefined-only "$runtime_binary" | grep -q 'filesystem.*remove_all'; then
  note "$runtime_binary imports std::filesystem::remove_all (libtorch's copy crashes; use validate::remove_directory_tree)"
  failed=1
fi
readelf -d "$runtime_binary" | grep -q 'NEEDED.*libstdc++' ||
  note "$runtime_binary has libstdc++ linked in statically: its std::filesystem calls bind to libtorch's exported copies"
if [ "$mode" = cpu ]; then
  # What the carry build must be: no Debian library from the carry packages linked, the device
  # path refused, and the runtime running plans.
  for binary in "$osdp" "$build_dir/cli/osdp-runtime"; do
    if readelf -d "$binary" | grep -E 'NEEDED.*(libfmt|libboost)'; then
      note "$binary links a Debian library the GPU machine lacks"
      failed=1
    fi
  done
  grep -q "header-only" "$out_dir/logs/configure.log" || { note "configure did not take the header-only dependencies"; failed=1; }
  for variable in nlohmann_json_DIR CLI11_DIR Boost_DIR OSDP_FMT_INCLUDE_DIR; do
    if ! grep -E "^$variable:[A-Z]+=$carry_dir/" "$build_dir/CMakeCache.txt" >/dev/null; then
      note "$variable was not taken from the carry: $(grep -E "^$variable:" "$build_dir/CMakeCache.txt" || echo unset)"
      failed=1
    fi
  done
  set +e
  "$osdp" calibrate --device cuda --ranks 1 >"$out_dir/logs/calibrate-cuda.log" 2>&1
  code=$?
  set -e
  if [ "$code" = 2 ] && grep -q "OSDP_WITH_CUDA=ON" "$out_dir/logs/calibrate-cuda.log"; then
    note "== calibrate --device cuda in a CPU build: exit 2, as it should ($(head -n 1 "$out_dir/logs/calibrate-cuda.log"))"
  else
    note "calibrate --device cuda in a CPU build: exit $code, expected 2 naming -DOSDP_WITH_CUDA=ON"
    failed=1
  fi
  run_step "validate (CPU, tiny GPT)" 120 "$out_dir/logs/validate-cpu.log" \
    "$osdp" validate scenarios/local-cpu-tiny.json --strategies "$strategies" --ranks 2 \
    --out "$out_dir/validate-cpu" || true
  if [ "$failed" = 0 ]; then note "gpu-check --cpu: passed"; else note "gpu-check --cpu: FAILED"; fi
  exit "$failed"
fi

# gpu mode: calibrate the GPU, then validate on its cluster (or, when calibrate failed, on the
# scenario's assumed one, and said so).
run_start="$(date +%s)"
cluster="$out_dir/h100-cluster.json"
calibrate_command
if ! run_step calibrate "$calibrate_timeout_s" "$out_dir/calibrate.txt" "${command_words[@]}"; then
  cluster=""
  note "   calibrate failed: validating against the scenario's assumed cluster instead"
fi
for batch in "${batch_list[@]}"; do
  left_s=$((run_budget_s - ($(date +%s) - run_start)))
  if [ "$left_s" -lt 20 ]; then
    note "== validate micro-batch $batch: skipped (${left_s} s left of the ${run_budget_s} s budget)"
    failed=1
    continue
  fi
  validate_command "$batch" "$cluster"
  run_step "validate micro-batch $batch" "$left_s" "$out_dir/validate-b$batch.txt" \
    "${command_words[@]}" || true
done

{
  echo
  echo "== compute laws calibrated on the GPU"
  sed -n '/compute law/,/kernel launch/p' "$out_dir/calibrate.txt" 2>/dev/null || true
  for batch in "${batch_list[@]}"; do
    [ -f "$out_dir/validate-b$batch/validation.csv" ] || continue
    echo
    echo "== micro-batch $batch: measured vs simulated ($out_dir/validate-b$batch/validation.csv)"
    cat "$out_dir/validate-b$batch/validation.csv"
  done
} >>"$summary"
if [ "$failed" = 0 ]; then note "gpu-check: every step passed; results in $out_dir"; else note "gpu-check: a step FAILED or was skipped; results and logs in $out_dir"; fi
exit "$failed"
