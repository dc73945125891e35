// Plausible ranges of the physical quantities osdp reads (README "Robustness"). A value outside
// its range is a typo or a unit slip ("1e308GBps", "12 GiB" read as a bandwidth...), and would
// make a figure infinite, zero or NaN downstream; loaders refuse it and name the range.
#pragma once

namespace osdp {

struct Range {
  double min;
  double max;
  const char* what;  // "a GPU's memory", for the message
};

namespace limits {
inline constexpr double kMiB = 1048576.0;
inline constexpr double kTiB = 1099511627776.0;
inline constexpr double kPiB = 1024.0 * kTiB;

inline constexpr Range gpu_memory_bytes{kMiB, 64 * kTiB, "a GPU's memory"};
inline constexpr Range host_memory_bytes{kMiB, 64 * kPiB, "a node's host memory"};
inline constexpr Range memory_limit_bytes{kMiB, 64 * kTiB, "a per-GPU memory limit"};
// Parameter, gradient, optimizer and activation bytes of one operator (per sample).
inline constexpr Range operator_bytes{0, kPiB, "an operator's bytes"};
inline constexpr Range parameter_count{0, 1e15, "an operator's parameter count"};
inline constexpr Range flops_per_sample{0, 1e21, "an operator's FLOPs per sample"};
inline constexpr Range bandwidth_Bps{1e3, 1e15, "a bandwidth"};
inline constexpr Range beta_s_per_byte{0, 1e-3, "seconds per byte"};
inline constexpr Range latency_s{0, 1, "a latency or fixed cost"};
inline constexpr Range compute_flops_per_s{1e6, 1e18, "a compute rate"};
inline constexpr Range compute_s_per_sample{0, 3600, "an operator's compute time per sample"};
inline constexpr Range time_limit_s{1e-3, 604800, "a search time limit"};
inline constexpr Range slowdown{1, 100, "a slowdown factor"};
// Measured figures read back (a kept validation, a measured table): a step of a microsecond to
// a day; below, a unit slip whose errors print with hundreds of digits.
inline constexpr Range measured_step_s{1e-6, 86400, "a measured step time"};
inline constexpr Range measured_wait_s{0, 86400, "a measured wait"};
inline constexpr Range measured_memory_bytes{1024, 64 * kTiB, "a measured peak memory"};
inline constexpr Range kernel_time_s{1e-9, 86400, "a kernel's time"};
}  // namespace limits

}  // namespace osdp
