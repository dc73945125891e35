// A benchmark program's own flags, taken off the command line before Google Benchmark reads the
// rest (it refuses flags it does not know), and its targets' verdicts.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace osdp::bench {

// Whether `flag` was given; every occurrence is removed from argv (argc shrinks with it).
inline bool take_flag(int& argc, char** argv, std::string_view flag) {
  bool given = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (flag == argv[i]) {
      given = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return given;
}

// A flag's value as a number, all of it (std::from_chars: no sign, no spaces, nothing after);
// nullopt otherwise.
template <class Number>
std::optional<Number> whole_number(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A measured time against its limit. Negative: not measured (its benchmark did not run, e.g. a
// --benchmark_filter left it out), which does not meet the target either.
inline bool target_met(double measured_s, double limit_s) {
  return measured_s >= 0 && measured_s <= limit_s;
}
// "0.123 s" (to `decimals`), or "-" if not measured.
inline std::string seconds_text(double measured_s, int decimals) {
  if (measured_s < 0) return "-";
  return fmt::format("{:.{}f} s", measured_s, decimals);
}
inline const char* verdict(double measured_s, double limit_s) {
  if (measured_s < 0) return "not measured";
  return measured_s <= limit_s ? "met" : "MISSED";
}

}  // namespace osdp::bench
