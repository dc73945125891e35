// Measured training iterations in the table format vTrain publishes (data/ground_truth_*.csv):
//   # GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,
//   tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)
// The header must be exactly that (the time column may be left out for configurations to
// predict). Bad tables are InputErrors naming the file, the row, the column and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace osdp {

struct MeasuredRun {
  std::string file;  // the table it came from
  int line = 0;      // 1-based line in the file (the header is line 1)
  int gpus = 1;
  int global_batch = 1;
  int micro_batch = 1;
  int hidden = 1;
  int heads = 1;
  int layers = 1;
  int sequence_length = 1;
  int tensor_parallelism = 1;
  int data_parallelism = 1;
  int pipeline_parallelism = 1;
  std::optional<double> iteration_time_s;

  // Micro-batches each rank accumulates per iteration.
  int accumulation_steps() const { return global_batch / (micro_batch * data_parallelism); }
  // What identifies the model, for leave-one-model-size-out cross-validation.
  std::string model_size() const;
};

struct MeasuredTable {
  std::string file;
  std::vector<std::string> columns;  // as in the header
  std::vector<MeasuredRun> runs;
  bool has_times() const { return columns.size() == 11; }
};

// The published column names, in order.
const std::vector<std::string>& measured_table_columns();

MeasuredTable read_measured_table(const std::string& path);
// Several tables as one (their rows in order, each keeping its file for errors): all with the
// time column or all without. One table is returned as it is.
MeasuredTable merge_measured_tables(std::vector<MeasuredTable> tables);
MeasuredTable parse_measured_table(const std::string& text, const std::string& file);

// The error for one cell (or row, with an empty column) of a table.
[[noreturn]] void fail_table_cell(const MeasuredTable& table, const MeasuredRun& run,
                                  const std::string& column, const std::string& value,
                                  const std::string& expected);

}  // namespace osdp
