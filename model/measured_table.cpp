#include "model/measured_table.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "model/csv.hpp"
#include "model/input_error.hpp"
#include "model/json_reader.hpp"

namespace osdp {
namespace {

std::string where(int line, const std::string& column) { return csv_location(line, column); }

// Each count column's cap: the scenario loader's for the same quantity (GPT layers, hidden,
// heads, sequence length; GPUs; micro-batch; --global-batch), so that no row builds a model or
// a cluster that no scenario file may.
constexpr long long count_caps[] = {
    1 << 20,  // # GPUs
    1 << 24,  // global batch
    1 << 20,  // micro batch
    1 << 20,  // hidden size
    1 << 16,  // attention heads
    100000,   // # layers
    1 << 24,  // sequence length
    1 << 20,  // tensor parallelism
    1 << 20,  // data parallelism
    1 << 20,  // pipeline parallelism
};
// One day: no training iteration is measured in longer ones; 1e300 ms is a typo.
constexpr double max_time_ms = 86400e3;
constexpr double min_time_ms = 1e-3;

int read_count(const std::string& file, int line, const std::string& column,
               const std::string& text, long long max_value) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 1 || value > max_value) {
    throw InputError(file, where(line, column), fmt::format("\"{}\"", text),
                     fmt::format("a whole number from 1 to {}", max_value));
  }
  return static_cast<int>(value);
}

double read_time_ms(const std::string& file, int line, const std::string& column,
                    const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value) || value < min_time_ms ||
      value > max_time_ms) {
    throw InputError(file, where(line, column), fmt::format("\"{}\"", text),
                     fmt::format("a number of milliseconds from {:g} (a microsecond) to {:.0f} "
                                 "(one day)",
                                 min_time_ms, max_time_ms));
  }
  return value;
}

}  // namespace

std::string MeasuredRun::model_size() const {
  return fmt::format("h{}-a{}-l{}-s{}", hidden, heads, layers, sequence_length);
}

const std::vector<std::string>& measured_table_columns() {
  static const std::vector<std::string> columns{"# GPUs",
                                                "global batch",
                                                "micro batch",
                                                "hidden size",
                                                "attention heads",
                                                "# layers",
                                                "sequence length",
                                                "tensor parallelism",
                                                "data parallelism",
                                                "pipeline parallelism",
                                                "iteration time (ms)"};
  return columns;
}

void fail_table_cell(const MeasuredTable& table, const MeasuredRun& run, const std::string& column,
                     const std::string& value, const std::string& expected) {
  throw InputError(run.file.empty() ? table.file : run.file, where(run.line, column), value,
                   expected);
}

MeasuredTable parse_measured_table(const std::string& text, const std::string& file) {
  MeasuredTable table;
  table.file = file;
  std::stringstream stream(without_byte_order_mark(text));
  std::string line;
  if (!std::getline(stream, line)) {
    throw InputError(file, "header", "an empty file", "the published header line");
  }
  table.columns = split_csv_line(line);
  const auto& expected = measured_table_columns();
  const bool with_times = table.columns == expected;
  const bool without_times =
      table.columns == std::vector<std::string>(expected.begin(), expected.end() - 1);
  if (!with_times && !without_times) {
    std::string joined;
    for (const auto& column : expected) joined += (joined.empty() ? "" : ",") + column;
    // The difference from the fuller header, unless the time column alone is what is missing.
    const std::vector<std::string> timeless(expected.begin(), expected.end() - 1);
    const std::string difference = table.columns.size() < expected.size()
                                       ? header_difference(table.columns, timeless)
                                       : header_difference(table.columns, expected);
    throw InputError(file, "header (line 1)", difference.empty() ? line : difference,
                     fmt::format("exactly \"{}\" (the time column may be left out)", joined));
  }
  int number = 1;
  while (std::getline(stream, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != table.columns.size()) {
      throw InputError(
          file, where(number, ""), fmt::format("{} cells", cells.size()),
          fmt::format("{} comma-separated cells, one per column", table.columns.size()));
    }
    MeasuredRun run;
    run.file = file;
    run.line = number;
    int* fields[] = {&run.gpus,
                     &run.global_batch,
                     &run.micro_batch,
                     &run.hidden,
                     &run.heads,
                     &run.layers,
                     &run.sequence_length,
                     &run.tensor_parallelism,
                     &run.data_parallelism,
                     &run.pipeline_parallelism};
    for (std::size_t c = 0; c < 10; ++c) {
      *fields[c] = read_count(file, number, expected[c], cells[c], count_caps[c]);
    }
    if (with_times)
      run.iteration_time_s = read_time_ms(file, number, expected[10], cells[10]) / 1e3;
    if (run.gpus != run.tensor_parallelism * run.data_parallelism * run.pipeline_parallelism) {
      fail_table_cell(table, run, "# GPUs", std::to_string(run.gpus),
                      "tensor x data x pipeline parallelism");
    }
    if (run.global_batch % (run.micro_batch * run.data_parallelism) != 0) {
      fail_table_cell(table, run, "global batch", std::to_string(run.global_batch),
                      fmt::format("a multiple of micro batch x data parallelism ({})",
                                  run.micro_batch * run.data_parallelism));
    }
    table.runs.push_back(run);
  }
  if (table.runs.empty()) throw InputError(file, "rows", "none", "at least one row");
  return table;
}

MeasuredTable read_measured_table(const std::string& path) {
  // A regular file of bounded size, as every input (never a FIFO, a device or a directory).
  return parse_measured_table(read_input_file(path, "CSV"), path);
}

MeasuredTable merge_measured_tables(std::vector<MeasuredTable> tables) {
  if (tables.empty()) throw InputError("", "--table", "no table", "at least one measured table");
  MeasuredTable merged = std::move(tables.front());
  for (std::size_t t = 1; t < tables.size(); ++t) {
    MeasuredTable& next = tables[t];
    if (next.has_times() != merged.has_times()) {
      throw InputError(next.file, "header (line 1)",
                       next.has_times() ? "an \"iteration time (ms)\" column" : "no time column",
                       fmt::format("the same columns as {}", merged.file));
    }
    merged.file += " + " + next.file;
    for (MeasuredRun& run : next.runs) merged.runs.push_back(std::move(run));
  }
  return merged;
}

}  // namespace osdp
