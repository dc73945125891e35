// MosaicML llm-foundry's published FSDP benchmark table (scripts/train/benchmarking/README.md),
// one training run per row, with its header as published:
//   Model,SeqLen (T),# GPUs,GPU,MFU,HFU,Model TFLOP,MicroBatchSize,GradAccum,GlobalBatchSize,
//   Throughput (S/s),Throughput (T/s),Throughput (T/s/GPU),GlobalBatchSize (T),Precision,
//   MP Mode,Sharding Strategy,Activation Checkpointing,Activation CPUOffload,NumParams
// optionally followed by `section` (the README table it came from) and `iter_time_s` (seconds
// per optimizer step). A row's measured step time is iter_time_s, else GlobalBatchSize (T) /
// Throughput (T/s); rows to predict may leave the measured columns (MFU, HFU, Model TFLOP,
// throughputs, NumParams, iter_time_s) empty. Bad tables are InputErrors naming the file, the
// line, the column and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace osdp {

struct FoundryRun {
  std::string file;   // the table it came from
  int line = 0;       // 1-based line (the header is line 1)
  std::string model;  // "125m", "7b", ...: the key of the scenario's model files
  int sequence_length = 1;
  int gpus = 1;
  std::string gpu;  // "a100_40gb", "a100_80gb", "h100_80gb", ...
  int micro_batch = 1;
  int accumulation_steps = 1;
  int global_batch = 1;
  std::string precision;        // amp_bf16, bf16, amp_fp8, amp_fp16, fp32
  std::string mixed_precision;  // MP Mode: DEFAULT, PURE, FULL
  std::string sharding;         // FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD
  bool activation_checkpointing = false;
  bool activation_cpu_offload = false;
  std::string section;
  // The published figures, when the row has them.
  std::optional<double> mfu_percent;
  std::optional<double> hfu_percent;
  std::optional<double> throughput_tokens_per_s;
  std::optional<double> parameters;  // NumParams
  std::optional<double> iteration_time_s;
};

struct FoundryTable {
  std::string file;
  std::vector<std::string> columns;  // as in the header
  std::vector<FoundryRun> runs;
  bool has_times() const;  // every row has a measured step time
};

// The published column names, in order (without section and iter_time_s).
const std::vector<std::string>& foundry_table_columns();
// Whether a header line is llm-foundry's (its first cell is "Model").
bool is_foundry_header(const std::string& header_line);

FoundryTable parse_foundry_table(const std::string& text, const std::string& file);
FoundryTable read_foundry_table(const std::string& path);
FoundryTable merge_foundry_tables(std::vector<FoundryTable> tables);

[[noreturn]] void fail_foundry_cell(const FoundryRun& run, const std::string& column,
                                    const std::string& value, const std::string& expected);

}  // namespace osdp
