#include "model/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

namespace osdp::units {
namespace {

struct UnitSpelling {
  std::string_view spelling;
  double scale;
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

// Splits "12.5GBps" into 12.5 and "GBps".
bool split_number(std::string_view text, double& number, std::string_view& unit) {
  text = trim(text);
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [next, error] = std::from_chars(begin, end, number);
  if (error != std::errc() || !std::isfinite(number)) return false;
  unit = trim(std::string_view(next, static_cast<std::size_t>(end - next)));
  return true;
}

std::optional<double> prefix_scale(std::string_view prefix) {
  static constexpr std::array<UnitSpelling, 14> prefixes{{{"", 1.0},
                                                          {"k", 1e3},
                                                          {"K", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"P", 1e15},
                                                          {"E", 1e18},
                                                          {"Ki", 1024.0},
                                                          {"Mi", 1048576.0},
                                                          {"Gi", 1073741824.0},
                                                          {"Ti", 1099511627776.0},
                                                          {"Pi", 1125899906842624.0},
                                                          {"Ei", 1152921504606846976.0}}};
  for (const auto& entry : prefixes) {
    if (entry.spelling == prefix) return entry.scale;
  }
  return std::nullopt;
}

// Tries each suffix; the part before it must be a known prefix.
std::optional<double> scale_with_suffixes(std::string_view unit,
                                          std::initializer_list<UnitSpelling> suffixes) {
  for (const auto& suffix : suffixes) {
    if (unit.size() < suffix.spelling.size()) continue;
    if (unit.substr(unit.size() - suffix.spelling.size()) != suffix.spelling) continue;
    const auto prefix = unit.substr(0, unit.size() - suffix.spelling.size());
    if (auto scale = prefix_scale(prefix)) return *scale * suffix.scale;
  }
  return std::nullopt;
}

std::optional<double> unit_scale(std::string_view unit, Dimension dimension) {
  switch (dimension) {
    case Dimension::bytes:
      if (unit.empty()) return 1.0;
      return scale_with_suffixes(unit, {{"B", 1.0}, {"bytes", 1.0}, {"byte", 1.0}});
    case Dimension::seconds: {
      static constexpr std::array<UnitSpelling, 8> durations{{{"", 1.0},
                                                              {"s", 1.0},
                                                              {"ms", 1e-3},
                                                              {"us", 1e-6},
                                                              {"µs", 1e-6},
                                                              {"ns", 1e-9},
                                                              {"min", 60.0},
                                                              {"h", 3600.0}}};
      for (const auto& entry : durations) {
        if (entry.spelling == unit) return entry.scale;
      }
      return std::nullopt;
    }
    case Dimension::bytes_per_second:
      if (unit.empty()) return 1.0;
      return scale_with_suffixes(
          unit, {{"Bps", 1.0}, {"B/s", 1.0}, {"bps", 0.125}, {"b/s", 0.125}, {"bit/s", 0.125}});
    case Dimension::flops_per_second:
      if (unit.empty()) return 1.0;
      return scale_with_suffixes(unit, {{"FLOPS", 1.0}, {"FLOP/s", 1.0}, {"flops", 1.0}});
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> parse(const std::string& text, Dimension dimension) {
  double number = 0.0;
  std::string_view unit;
  if (!split_number(text, number, unit)) return std::nullopt;
  const auto scale = unit_scale(unit, dimension);
  if (!scale) return std::nullopt;
  return number * *scale;
}

std::string expected_form(Dimension dimension) {
  switch (dimension) {
    case Dimension::bytes:
      return "a size in bytes such as \"16GiB\", \"800MB\" or a number of bytes";
    case Dimension::seconds:
      return "a duration such as \"5us\", \"2ms\" or a number of seconds";
    case Dimension::bytes_per_second:
      return "a bandwidth such as \"12GBps\", \"100Gbps\" or a number of bytes per second";
    case Dimension::flops_per_second:
      return "a compute rate such as \"130TFLOPS\" or a number of FLOP per second";
  }
  return "a quantity";
}

std::string format_bytes(double bytes) {
  const double magnitude = std::fabs(bytes);
  if (magnitude >= 1073741824.0) return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
  if (magnitude >= 1048576.0) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (magnitude >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string format_bytes_above(double bytes, double limit_bytes) {
  const std::string plain = format_bytes(bytes);
  if (!(bytes > limit_bytes) || plain != format_bytes(limit_bytes)) return plain;
  const double magnitude = std::fabs(bytes);
  const auto [scale, unit] = magnitude >= 1073741824.0 ? std::pair{1073741824.0, "GiB"}
                             : magnitude >= 1048576.0  ? std::pair{1048576.0, "MiB"}
                                                       : std::pair{1024.0, "KiB"};
  for (int digits = 2; digits <= 9; ++digits) {
    const std::string need = fmt::format("{:.{}f} {}", bytes / scale, digits, unit);
    if (need != fmt::format("{:.{}f} {}", limit_bytes / scale, digits, unit)) return need;
  }
  return fmt::format("{:.0f} B", bytes);
}

std::string format_seconds(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (magnitude >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

std::string format_bandwidth(double bytes_per_second) {
  // GB/s for links and memories; a latency-bound collective's few MB/s would print as 0.0 GB/s.
  if (bytes_per_second >= 1e9 || bytes_per_second <= 0) {
    return fmt::format("{:.1f} GB/s", bytes_per_second / 1e9);
  }
  if (bytes_per_second >= 1e6) return fmt::format("{:.1f} MB/s", bytes_per_second / 1e6);
  return fmt::format("{:.1f} kB/s", bytes_per_second / 1e3);
}

}  // namespace osdp::units
