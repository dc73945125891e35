#!/usr/bin/env bash
# The README's second command: installs the Debian packages that are missing, builds everything
# once (release preset) and runs the whole test suite with ctest in parallel; compiles the GPU
# parts when the CUDA toolkit is there (cuda-check preset); then the same suite built with
# AddressSanitizer + UBSan (debug preset), and the loaders' and the command line's libFuzzer
# harnesses for a bounded time
# (fuzz preset). Any failure, sanitizer report or fuzzer crash fails the run.
#   OSDP_JOBS        build and test parallelism (default: all cores; CI uses 2)
#   OSDP_SANITIZERS  0 skips the sanitizer pass (default 1)
#   OSDP_FUZZ_S      seconds of fuzzing the loaders, 0 skips all fuzzing (default 60)
#   OSDP_FUZZ_CLI_S  seconds of fuzzing the command line (default 30)
#   OSDP_CUDA_CHECK  0 skips compiling the GPU parts (default 1: when the CUDA toolkit is there)
#   OSDP_GPU_CHECK   1 also runs scripts/gpu-check.sh's CPU build from its carry (7 minutes on
#                    2 cores; default 0: the carry is prepared and its size checked only)
# The sanitizer pass skips the tests labelled "slow" (long end-to-end runs the release pass
# runs; the debug test preset's filter): with them the run took more than CI's 90 minutes.
# Each step's start and length are printed (stderr), and a summary at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
run_start_s=$SECONDS
step_name=""
step_start_s=$SECONDS
step_summary=""
# step NAME: ends the step before (its length goes into the summary) and starts NAME.
step() {
  end_step
  step_name="$1"
  step_start_s=$SECONDS
  echo "== $1 ($(date -u +%H:%M:%S) UTC, ${SECONDS}s into the run)" >&2
}
end_step() {
  if [ -n "$step_name" ]; then
    step_summary+="$(printf '%6ds  %s' $((SECONDS - step_start_s)) "$step_name")"$'\n'
  fi
  step_name=""
}
jobs="${OSDP_JOBS:-$(nproc)}"
sanitizers="${OSDP_SANITIZERS:-1}"
fuzz_seconds="${OSDP_FUZZ_S:-60}"
fuzz_cli_seconds="${OSDP_FUZZ_CLI_S:-30}"

step "install missing Debian packages (scripts/install-deps.sh)"
scripts/install-deps.sh

step "release build"
cmake --preset release
cmake --build --preset release -j "$jobs"
step "release tests"
ctest --preset release -j "$jobs"

# The GPU parts, compiled without a GPU when the machine image's CUDA toolkit (with NCCL) is
# there: the NCCL calibration probe is built and linked, the runtime's device path compiled.
if [ "${OSDP_CUDA_CHECK:-1}" != "0" ] && [ -x /usr/local/cuda/bin/nvcc ] &&
  [ -f /usr/local/cuda/include/nccl.h ]; then
  step "CUDA + NCCL compile check (cuda-check preset; nothing runs: no GPU)"
  cmake --preset cuda-check
  cmake --build --preset cuda-check -j "$jobs"
elif [ "${OSDP_CUDA_CHECK:-1}" = "0" ]; then
  echo "== CUDA + NCCL compile check skipped (OSDP_CUDA_CHECK=0)" >&2
else
  echo "== CUDA + NCCL compile check skipped (no CUDA toolkit with NCCL in /usr/local/cuda)" >&2
fi

# scripts/gpu-check.sh, the one command for a lent GPU machine, as far as a CPU machine can run
# it: the carry of Debian headers it sends there (apt-get download, pruned, its size checked),
# then its own configure and build of osdp and osdp-runtime from that carry against Debian's CPU
# libtorch (build/gpu-cpu; no simulator, no CUDA) and its checks of the result.
step "gpu-check.sh's carry (scripts/gpu-check.sh --prepare-carry)"
scripts/gpu-check.sh --prepare-carry
if [ "${OSDP_GPU_CHECK:-0}" != "0" ]; then
  step "gpu-check.sh's CPU build from the carry (scripts/gpu-check.sh --cpu)"
  scripts/gpu-check.sh --cpu --jobs "$jobs" --out build/gpu-cpu-check
else
  echo "== gpu-check.sh's CPU build skipped (OSDP_GPU_CHECK=1 runs it)" >&2
fi

if [ "$sanitizers" != "0" ]; then
  step "AddressSanitizer + UBSan build (debug preset)"
  cmake --preset debug
  cmake --build --preset debug -j "$jobs"
  step "AddressSanitizer + UBSan tests (debug preset, without the slow label)"
  ctest --preset debug -j "$jobs"  # sanitizer options: the debug test preset in CMakePresets.json
fi

if [ "$fuzz_seconds" != "0" ]; then
  step "libFuzzer on the JSON loaders and the unit parser (${fuzz_seconds} s, with its build)"
  cmake --preset fuzz
  cmake --build --preset fuzz -j "$jobs"
  corpus="$(mktemp -d)"
  trap 'rm -rf "$corpus"' EXIT
  ./build/fuzz/tests/fuzz/fuzz_loaders -max_total_time="$fuzz_seconds" -rss_limit_mb=4096 \
    -max_len=4096 -dict=tests/fuzz/loaders.dict -print_final_stats=1 -artifact_prefix=build/fuzz/ \
    "$corpus" tests/fuzz/corpus
  if [ "$fuzz_cli_seconds" != "0" ]; then
    step "libFuzzer on the command line: plan, explain, layout (${fuzz_cli_seconds} s)"
    cli_corpus="$(mktemp -d)"
    trap 'rm -rf "$corpus" "$cli_corpus"' EXIT
    ./build/fuzz/tests/fuzz/fuzz_command_line -max_total_time="$fuzz_cli_seconds" \
      -rss_limit_mb=4096 -timeout=60 -max_len=512 -dict=tests/fuzz/command_line.dict \
      -print_final_stats=1 -artifact_prefix=build/fuzz/ "$cli_corpus" tests/fuzz/command_line_corpus
  fi
fi

end_step
echo "== every step passed in $((SECONDS - run_start_s)) s:" >&2
printf '%s' "$step_summary" >&2
