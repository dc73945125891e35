#include "cli/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/units.hpp"
#include "model/wrapping.hpp"

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

namespace {

bool same_runs(const std::vector<ChoiceRun>& runs, std::size_t a, std::size_t b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!(runs[a + i].choice == runs[b + i].choice) || runs[a + i].count != runs[b + i].count) {
      return false;
    }
  }
  return true;
}

// How often the block of `period` runs starting at `first` repeats back to back.
std::size_t repeats(const std::vector<ChoiceRun>& runs, std::size_t first, std::size_t period) {
  std::size_t count = 1;
  while (first + (count + 1) * period <= runs.size() &&
         same_runs(runs, first, first + count * period, period)) {
    ++count;
  }
  return count;
}

}  // namespace

std::string render_runs(const Workload& scenario_workload, const Plan& plan,
                        const std::string& indent) {
  // A plan of FSDP units lists its units (the model wrapped as it says).
  std::optional<Workload> wrapped;
  std::string header;
  if (wraps(plan, scenario_workload)) {
    wrapped.emplace(wrap_workload(scenario_workload, plan.unit_sizes));
    header = indent + "FSDP units: " + describe_units(plan.unit_sizes) + "\n";
  }
  const Workload& workload = wrapped ? *wrapped : scenario_workload;
  // A block of up to 4 runs repeated 3 times or more (e.g. attention / MLP alternating) is one
  // line: "[zdp+fused-ckpt, zdp] repeated".
  constexpr std::size_t max_period = 4;
  constexpr std::size_t min_repeats = 3;
  const std::vector<ChoiceRun> runs = compress_runs(workload, plan);
  // Counts are of units when the plan wraps the model into FSDP units.
  Table table({{wrapped ? "units" : "operators"}, {"choice"}, {"count", Table::Align::right}});
  std::size_t i = 0;
  while (i < runs.size()) {
    std::size_t period = 0;
    std::size_t times = 1;
    for (std::size_t p = 2; p <= max_period && i + p * min_repeats <= runs.size(); ++p) {
      const std::size_t r = repeats(runs, i, p);
      if (r >= min_repeats) {
        period = p;
        times = r;
        break;
      }
    }
    if (period == 0) {
      table.add_row({run_label(workload, runs[i]), describe(runs[i].choice),
                     fmt::format("x{}", runs[i].count)});
      ++i;
      continue;
    }
    std::string choices;
    int operators = 0;
    for (std::size_t k = 0; k < period; ++k) {
      const ChoiceRun& run = runs[i + k];
      choices += (k ? ", " : "") + describe(run.choice) +
                 (run.count > 1 ? fmt::format(" x{}", run.count) : "");
      operators += run.count;
    }
    const ChoiceRun span{runs[i].first, runs[i + times * period - 1].last, 2, {}};
    table.add_row(
        {run_label(workload, span), "[" + choices + "] repeated",
         fmt::format("x{} ({} x {})", operators * static_cast<int>(times), times, operators)});
    i += times * period;
  }
  return header + table.render(indent);
}

std::string memory_limit_flag_value(double bytes) {
  // Rounded up: half a unit of the last digit added before the format rounds to nearest.
  const double gib = bytes / 1073741824.0;
  if (gib >= 1.0) return fmt::format("{:.2f}GiB", gib + 0.005);
  const double mib = bytes / 1048576.0;
  if (mib >= 1.0) return fmt::format("{:.1f}MiB", mib + 0.05);
  return fmt::format("{:.0f}KiB", bytes / 1024.0 + 0.5);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string wrap_words(const std::string& text, std::size_t width, const std::string& indent) {
  std::string wrapped;
  std::size_t line_start = 0;  // where the current line begins in `wrapped`
  std::size_t word_start = 0;
  auto add_word = [&](const std::string& word) {
    if (word.empty()) return;
    const bool at_line_start = wrapped.size() == line_start;
    if (!at_line_start && wrapped.size() - line_start + 1 + word.size() > width) {
      wrapped += "\n" + indent;
      line_start = wrapped.size() - indent.size();
    } else if (!at_line_start) {
      wrapped += ' ';
    }
    wrapped += word;
  };
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ' || text[i] == '\n') {
      add_word(text.substr(word_start, i - word_start));
      word_start = i + 1;
      if (i < text.size() && text[i] == '\n') {
        wrapped += '\n';
        line_start = wrapped.size();
      }
    }
  }
  return wrapped;
}

}  // namespace osdp::cli
