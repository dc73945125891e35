#include "model/foundry_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model/csv.hpp"
#include "model/input_error.hpp"
#include "model/json_reader.hpp"

namespace osdp {
namespace {

constexpr int max_count = 1 << 24;

struct RowReader : CsvRow {
  int count(const std::string& column) const {
    const std::optional<long long> value = whole_number(cell(column), max_count);
    if (!value) fail(column, fmt::format("a whole number from 1 to {}", max_count));
    return static_cast<int>(*value);
  }
  // A published figure: empty (not measured) or a positive finite number, within
  // [least, most] (a percentage at most 100, a step time from a microsecond to a day).
  std::optional<double> figure(const std::string& column, double least = 0,
                               double most = 1e30) const {
    const std::string& text = cell(column);
    if (text.empty()) return std::nullopt;
    const std::optional<double> value = positive_number(text, most);
    if (!value || *value < least) {
      fail(column, most < 1e30 ? fmt::format("a positive number from {:g} to {:g}, or nothing "
                                             "where the row was not measured",
                                             least, most)
                               : "a positive number, or nothing where the row was not measured");
    }
    return value;
  }
  std::string choice(const std::string& column, const std::vector<std::string>& choices) const {
    const std::string& text = cell(column);
    if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
    std::string listed;
    for (const std::string& c : choices) listed += (listed.empty() ? "" : ", ") + c;
    fail(column, "one of " + listed);
  }
  // A name: letters, digits, '_', '.', '-' (it selects a scenario's file).
  std::string name(const std::string& column) const {
    const std::string& text = cell(column);
    const bool ok =
        !text.empty() && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
        });
    if (!ok) fail(column, "a name of 1 to 64 letters, digits, '_', '.' or '-'");
    return text;
  }
};

}  // namespace

bool FoundryTable::has_times() const {
  return std::all_of(runs.begin(), runs.end(),
                     [](const FoundryRun& run) { return run.iteration_time_s.has_value(); });
}

const std::vector<std::string>& foundry_table_columns() {
  static const std::vector<std::string> columns{"Model",
                                                "SeqLen (T)",
                                                "# GPUs",
                                                "GPU",
                                                "MFU",
                                                "HFU",
                                                "Model TFLOP",
                                                "MicroBatchSize",
                                                "GradAccum",
                                                "GlobalBatchSize",
                                                "Throughput (S/s)",
                                                "Throughput (T/s)",
                                                "Throughput (T/s/GPU)",
                                                "GlobalBatchSize (T)",
                                                "Precision",
                                                "MP Mode",
                                                "Sharding Strategy",
                                                "Activation Checkpointing",
                                                "Activation CPUOffload",
                                                "NumParams"};
  return columns;
}

bool is_foundry_header(const std::string& header_line) {
  const std::vector<std::string> cells = split_csv_line(without_byte_order_mark(header_line));
  return !cells.empty() && cells.front() == "Model";
}

void fail_foundry_cell(const FoundryRun& run, const std::string& column, const std::string& value,
                       const std::string& expected) {
  throw InputError(run.file, csv_location(run.line, column), value, expected);
}

FoundryTable parse_foundry_table(const std::string& text, const std::string& file) {
  FoundryTable table;
  table.file = file;
  std::stringstream stream(without_byte_order_mark(text));
  std::string line;
  if (!std::getline(stream, line)) {
    throw InputError(file, "header", "an empty file", "llm-foundry's published header line");
  }
  table.columns = split_csv_line(line);
  const auto& published = foundry_table_columns();
  std::vector<std::string> with_section = published;
  with_section.push_back("section");
  std::vector<std::string> with_time = with_section;
  with_time.push_back("iter_time_s");
  std::vector<std::string> with_time_only = published;
  with_time_only.push_back("iter_time_s");
  if (table.columns != published && table.columns != with_section && table.columns != with_time &&
      table.columns != with_time_only) {
    std::string joined;
    for (const auto& column : published) joined += (joined.empty() ? "" : ",") + column;
    const std::vector<std::string>& closest =
        table.columns.size() > with_section.size() ? with_time : published;
    const std::string difference = header_difference(table.columns, closest);
    throw InputError(file, "header (line 1)", difference.empty() ? line : difference,
                     fmt::format("llm-foundry's published header \"{}\", optionally followed by "
                                 "\"section\" and \"iter_time_s\"",
                                 joined));
  }
  const bool has_section =
      std::find(table.columns.begin(), table.columns.end(), "section") != table.columns.end();
  const bool has_time =
      std::find(table.columns.begin(), table.columns.end(), "iter_time_s") != table.columns.end();
  int number = 1;
  while (std::getline(stream, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != table.columns.size()) {
      throw InputError(
          file, csv_location(number, ""), fmt::format("{} cells", cells.size()),
          fmt::format("{} comma-separated cells, one per column", table.columns.size()));
    }
    const RowReader row{{file, number, table.columns, cells}};
    FoundryRun run;
    run.file = file;
    run.line = number;
    run.model = row.name("Model");
    run.sequence_length = row.count("SeqLen (T)");
    run.gpus = row.count("# GPUs");
    run.gpu = row.name("GPU");
    run.mfu_percent = row.figure("MFU", 0, 100);
    run.hfu_percent = row.figure("HFU", 0, 100);
    run.micro_batch = row.count("MicroBatchSize");
    run.accumulation_steps = row.count("GradAccum");
    run.global_batch = row.count("GlobalBatchSize");
    run.throughput_tokens_per_s = row.figure("Throughput (T/s)");
    run.precision = row.choice("Precision", {"amp_bf16", "bf16", "amp_fp8", "amp_fp16", "fp32"});
    run.mixed_precision = row.choice("MP Mode", {"DEFAULT", "PURE", "FULL"});
    run.sharding = row.choice("Sharding Strategy",
                              {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"});
    run.activation_checkpointing =
        row.choice("Activation Checkpointing", {"True", "False"}) == "True";
    run.activation_cpu_offload = row.choice("Activation CPUOffload", {"True", "False"}) == "True";
    run.parameters = row.figure("NumParams");
    if (has_section) run.section = row.cell("section");
    if (has_time) {
      run.iteration_time_s =
          row.figure("iter_time_s", limits::measured_step_s.min, limits::measured_step_s.max);
    }
    const std::optional<double> batch_tokens = row.figure("GlobalBatchSize (T)");
    if (!run.iteration_time_s && batch_tokens && run.throughput_tokens_per_s) {
      run.iteration_time_s = *batch_tokens / *run.throughput_tokens_per_s;
    }
    const long long per_step =
        static_cast<long long>(run.micro_batch) * run.accumulation_steps * run.gpus;
    if (per_step != run.global_batch) {
      row.fail("GlobalBatchSize",
               fmt::format("MicroBatchSize x GradAccum x # GPUs ({})", per_step));
    }
    if (run.activation_cpu_offload) {
      row.fail("Activation CPUOffload", "False (osdp does not model activation offload)");
    }
    table.runs.push_back(std::move(run));
  }
  if (table.runs.empty()) throw InputError(file, "rows", "none", "at least one row");
  return table;
}

FoundryTable read_foundry_table(const std::string& path) {
  return parse_foundry_table(read_input_file(path, "CSV"), path);
}

FoundryTable merge_foundry_tables(std::vector<FoundryTable> tables) {
  if (tables.empty()) throw InputError("", "--table", "no table", "at least one measured table");
  FoundryTable merged = std::move(tables.front());
  for (std::size_t t = 1; t < tables.size(); ++t) {
    merged.file += " + " + tables[t].file;
    for (FoundryRun& run : tables[t].runs) merged.runs.push_back(std::move(run));
  }
  return merged;
}

}  // namespace osdp
