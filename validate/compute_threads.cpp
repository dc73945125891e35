#include "validate/compute_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace osdp::validate {

void use_one_compute_thread() {
  at::set_num_threads(1);
  // Looked up at run time: the BLAS behind libtorch is chosen by Debian's alternatives
  // (reference BLAS, OpenBLAS, BLIS), and only OpenBLAS has this entry point.
  using SetThreads = void (*)(int);
  if (auto* set_threads =
          reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_threads(1);
  }
}

void let_communication_preempt_compute() {
  // Linux keeps a nice value per thread: PRIO_PROCESS with a thread id sets this thread's only.
  const auto thread = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, thread);
  if (errno != 0) return;
  ::setpriority(PRIO_PROCESS, thread, std::min(19, nice + compute_nicer_by));
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double scheduler_tick_s() {
  timespec resolution{};
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) != 0) return 0.0;
  return static_cast<double>(resolution.tv_sec) + 1e-9 * static_cast<double>(resolution.tv_nsec);
}

}  // namespace osdp::validate
