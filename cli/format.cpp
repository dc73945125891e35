#include "cli/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/units.hpp"

namespace osdp::cli {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render(const std::string& indent) const {
  std::vector<std::size_t> widths(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto render_line = [&](auto cell_of) {
    std::string line = indent;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_of(c);
      const bool last = c + 1 == columns_.size();
      if (columns_[c].align == Align::right) {
        line += fmt::format("{:>{}}", cell, widths[c]);
      } else {
        line += last ? cell : fmt::format("{:<{}}", cell, widths[c]);
      }
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string text =
      render_line([&](std::size_t c) -> const std::string& { return columns_[c].header; });
  std::size_t total = 0;
  for (std::size_t c = 0; c < widths.size(); ++c)
    total += widths[c] + (c + 1 < widths.size() ? 2 : 0);
  text += indent + std::string(total, '-') + "\n";
  for (const auto& row : rows_) {
    text += render_line([&](std::size_t c) -> const std::string& { return row[c]; });
  }
  return text;
}

std::string format_throughput(double samples_per_s) {
  if (samples_per_s >= 100.0) return fmt::format("{:.1f} samples/s", samples_per_s);
  return fmt::format("{:.2f} samples/s", samples_per_s);
}

std::string format_percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }

std::string format_count(double count) {
  const double magnitude = std::fabs(count);
  if (magnitude >= 1e9) return fmt::format("{:.2f} B", count / 1e9);
  if (magnitude >= 1e6) return fmt::format("{:.0f} M", count / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.1f} k", count / 1e3);
  return fmt::format("{:.0f}", count);
}

std::string describe_peak(const PeakBreakdown& peak, const Workload& workload) {
  const std::string dominant = peak.dominant_part();
  auto part = [&](const char* name, double bytes) {
    return fmt::format("{} {}{}", name, units::format_bytes(bytes),
                       dominant == name ? " (dominant)" : "");
  };
  std::string text = part("model states", peak.model_state_bytes) + ", " +
                     part("activations", peak.activation_bytes);
  if (peak.extra_bytes > 0) text += ", " + part("extra buffers", peak.extra_bytes);
  text += ", " + part("transient buffers", peak.transient_bytes);
  if (peak.transient_bytes > 0 && peak.transient_operator >= 0) {
    text += fmt::format(" (while {} runs)", workload.op(peak.transient_operator).name);
  }
  return text;
}

std::vector<ChoiceRun> compress_runs(const Workload& workload, const Plan& plan) {
  std::vector<ChoiceRun> runs;
  for (int index : workload.execution_order()) {
    const OperatorChoice& choice = plan.choices.at(index);
    if (!runs.empty() && runs.back().choice == choice) {
      runs.back().last = index;
      ++runs.back().count;
    } else {
      runs.push_back({index, index, 1, choice});
    }
  }
  return runs;
}

std::string run_label(const Workload& workload, const ChoiceRun& run) {
  if (run.count == 1) return workload.op(run.first).name;
  return workload.op(run.first).name + ".." + workload.op(run.last).name;
}

std::string render_runs(const Workload& workload, const Plan& plan, const std::string& indent) {
  Table table({{"operators"}, {"choice"}, {"count", Table::Align::right}});
  for (const ChoiceRun& run : compress_runs(workload, plan)) {
    table.add_row({run_label(workload, run), describe(run.choice), fmt::format("x{}", run.count)});
  }
  return table.render(indent);
}

}  // namespace osdp::cli
