#include "cli/scenario_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/units.hpp"
#include "validate/validation_options.hpp"

namespace osdp::cli {
namespace {

constexpr const char* command_line = "command line";

std::string join_modes(const std::vector<Mode>& modes) {
  std::string text;
  for (Mode mode : modes) text += (text.empty() ? "" : ",") + std::string(mode_name(mode));
  return text;
}

std::string checkpoint_policy_name(SearchSpec::CheckpointPolicy policy) {
  switch (policy) {
    case SearchSpec::CheckpointPolicy::off:
      return "off";
    case SearchSpec::CheckpointPolicy::on:
      return "on";
    case SearchSpec::CheckpointPolicy::automatic:
      return "auto";
  }
  return "?";
}

int count_flag(const std::string& flag, const std::string& text, int max_value) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 1 || value > max_value) {
    throw InputError(command_line, flag, text,
                     fmt::format("a whole number from 1 to {}", max_value));
  }
  return static_cast<int>(value);
}

// --micro-batch, --accumulation, --global-batch, --precision, --seq-len: the training a user
// states for one run. A generated GPT is generated again for a new precision or sequence length.
void apply_training_overrides(const ScenarioOptions& options, Scenario& scenario) {
  Training& training = scenario.training;
  if (!options.accumulation.empty() && !options.global_batch.empty()) {
    throw InputError(command_line, "--accumulation", options.accumulation,
                     "either --accumulation or --global-batch (the global batch sets the "
                     "accumulation for each micro-batch)");
  }
  if (!options.micro_batch.empty()) {
    const int batch = count_flag("--micro-batch", options.micro_batch, 1 << 20);
    training.min_batch_size = batch;
    training.max_batch_size = batch;
  }
  if (!options.accumulation.empty()) {
    training.accumulation_steps = count_flag("--accumulation", options.accumulation, 1 << 20);
    training.global_batch_size.reset();
  }
  if (!options.global_batch.empty()) {
    const int global = count_flag("--global-batch", options.global_batch, 1 << 24);
    training.global_batch_size = global;
    const int ranks = scenario.cluster.ranks;
    bool reachable = false;
    for (int b = training.min_batch_size; b <= training.max_batch_size && !reachable; ++b) {
      if (!options.layouts) {
        reachable = training.accumulation_for(b, ranks).has_value();
        continue;
      }
      for (int data = 1; data <= ranks && !reachable; ++data) {
        reachable = ranks % data == 0 && global % (static_cast<long long>(b) * data) == 0;
      }
    }
    if (!reachable) {
      throw InputError(
          command_line, "--global-batch", options.global_batch,
          options.layouts
              ? fmt::format("a multiple of micro-batch x a data-parallel degree (a divisor of {} "
                            "GPUs) for some micro-batch from {} to {}",
                            ranks, training.min_batch_size, training.max_batch_size)
              : fmt::format("a multiple of micro-batch x {} ranks for some micro-batch "
                            "from {} to {}",
                            ranks, training.min_batch_size, training.max_batch_size));
    }
  }
  bool regenerate = false;
  if (!options.precision.empty()) {
    const std::string& p = options.precision;
    if (p == "fp32") {
      training.precision = Precision::fp32;
    } else if (p == "mixed") {
      training.precision = Precision::mixed;
    } else if (p == "amp_bf16") {
      training.precision = Precision::mixed;
      training.gradient_reduce = ReducePrecision::fp32;
    } else if (p == "bf16") {
      training.precision = Precision::mixed;
      training.gradient_reduce = ReducePrecision::parameters;
    } else {
      throw InputError(command_line, "--precision", p, "fp32, mixed, amp_bf16 or bf16");
    }
    regenerate = true;
  }
  if (!options.seq_len.empty()) {
    if (!scenario.gpt) {
      throw InputError(command_line, "--seq-len", options.seq_len,
                       "a scenario whose model is generated (\"family\": \"gpt\"); an "
                       "operator list has its sizes written out");
    }
    scenario.gpt->sequence_length = count_flag("--seq-len", options.seq_len, 1 << 22);
    regenerate = true;
  }
  if (regenerate) {
    if (!scenario.gpt) {
      throw InputError(command_line, "--precision", options.precision,
                       "a scenario whose model is generated (\"family\": \"gpt\"); set an "
                       "operator list's precision in its scenario's training");
    }
    scenario.workload = std::make_shared<const Workload>(make_gpt(*scenario.gpt, training));
  }
}

void apply_search_overrides(const ScenarioOptions& options, Scenario& scenario) {
  if (!options.modes.empty()) {
    refuse_empty_items("--modes", options.modes);
    const auto modes = parse_modes(options.modes);
    if (!modes) {
      throw InputError(command_line, "--modes", options.modes,
                       "a comma-separated list of modes among " + mode_names());
    }
    for (Mode mode : *modes) {
      if (!mode_fits_cluster(mode, scenario.cluster)) {
        throw InputError(
            command_line, "--modes", options.modes,
            fmt::format("{} only on {}", mode_name(mode), mode_cluster_requirement(mode)));
      }
    }
    scenario.search.modes = *modes;
  }
  if (!options.split.empty()) {
    const auto split = parse_split(options.split);
    if (!split) throw InputError(command_line, "--split", options.split, "1, 2, 4, 8 or auto");
    scenario.search.granularities = *split;
  }
  if (!options.checkpoint.empty()) {
    const auto policy = parse_checkpoint_policy(options.checkpoint);
    if (!policy)
      throw InputError(command_line, "--checkpoint", options.checkpoint, "off, on or auto");
    scenario.search.checkpoint = *policy;
  }
  if (!options.units.empty()) {
    const auto policy = parse_units_policy(options.units);
    if (!policy) throw InputError(command_line, "--units", options.units, "off, block or auto");
    scenario.search.units = *policy;
  }
  if (!options.offload.empty()) {
    const auto policy = parse_offload_policy(options.offload);
    if (!policy) throw InputError(command_line, "--offload", options.offload, "off, on or auto");
    scenario.search.offload = *policy;
  }
  if (!options.min_unit_params.empty()) {
    double count = 0;
    try {
      std::size_t used = 0;
      count = std::stod(options.min_unit_params, &used);
      if (used != options.min_unit_params.size()) count = 0;
    } catch (const std::exception&) {
      count = 0;
    }
    if (!(count >= 1 && count <= 1e15)) {
      throw InputError(command_line, "--min-unit-params", options.min_unit_params,
                       "a parameter count from 1 to 1e15, e.g. 1e8");
    }
    scenario.search.min_unit_parameters = count;
  }
  if (!options.gap.empty()) {
    double gap = -1;
    try {
      std::size_t used = 0;
      gap = std::stod(options.gap, &used);
      if (used != options.gap.size()) gap = -1;
    } catch (const std::exception&) {
      gap = -1;
    }
    if (!(gap >= 0 && gap < 0.5)) {
      throw InputError(command_line, "--gap", options.gap,
                       "a fraction of the iteration time in [0, 0.5), e.g. 1e-4 (0: exact)");
    }
    scenario.search.optimality_gap = gap;
  }
  if (!options.time_limit.empty()) {
    const auto seconds = units::parse(options.time_limit, units::Dimension::seconds);
    const Range& range = limits::time_limit_s;
    if (!seconds || !(*seconds >= range.min && *seconds <= range.max)) {
      throw InputError(command_line, "--time-limit", options.time_limit,
                       units::expected_form(units::Dimension::seconds) + ", " +
                           describe_range(range, units::Dimension::seconds));
    }
    scenario.search.time_limit_s = *seconds;
  }
  if (!options.cost_model.empty()) {
    if (options.cost_model != "paper" && options.cost_model != "extended") {
      throw InputError(command_line, "--cost-model", options.cost_model, "paper or extended");
    }
    scenario.cost.kind =
        options.cost_model == "paper" ? CostModelKind::paper : CostModelKind::extended;
  }
}

}  // namespace

void refuse_empty_items(const std::string& flag, const std::string& text, char separator) {
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(separator, begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    if (item.find_first_not_of(" \t") == std::string::npos) {
      throw InputError(command_line, flag, fmt::format("\"{}\"", text),
                       fmt::format("items separated by '{}', none of them empty", separator));
    }
    if (end == text.size()) return;
    begin = end + 1;
  }
}

double parse_bytes_flag(const std::string& flag, const std::string& text) {
  const auto bytes = units::parse(text, units::Dimension::bytes);
  if (!bytes || *bytes <= 0) {
    throw InputError(command_line, flag, text,
                     units::expected_form(units::Dimension::bytes) + ", above zero");
  }
  return *bytes;
}

void check_memory_limit_flag(const std::string& flag, const std::string& text, double limit_bytes,
                             const Scenario& scenario) {
  const Range& range = limits::memory_limit_bytes;
  if (limit_bytes < range.min || limit_bytes > range.max) {
    throw InputError(command_line, flag, text,
                     "a memory limit " + describe_range(range, units::Dimension::bytes));
  }
  const auto& memory = scenario.cluster.gpu.memory_bytes;
  if (memory && limit_bytes > *memory) {
    throw InputError(command_line, flag, text,
                     fmt::format("at most the GPU's memory ({})", units::format_bytes(*memory)));
  }
}

std::vector<double> parse_memory_limits(const std::string& text, int max_points) {
  const std::string flag = "--memory-limits";
  std::vector<std::string> parts;
  const char separator = text.find(':') != std::string::npos ? ':' : ',';
  refuse_empty_items(flag, text, separator);
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (separator == ',') {
    if (static_cast<int>(parts.size()) > max_points) {
      throw InputError("command line", flag, text,
                       fmt::format("at most {} memory limits", max_points));
    }
    // A sweep is a curve over the limit: listed in any order, swept in increasing order, a
    // limit listed twice swept once.
    std::vector<double> limits;
    for (const auto& part : parts) limits.push_back(parse_bytes_flag(flag, part));
    std::sort(limits.begin(), limits.end());
    limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
    return limits;
  }
  if (parts.size() != 3) {
    throw InputError("command line", flag, text,
                     "START:STOP:STEP (e.g. 4GiB:24GiB:1GiB) or a list 8GiB,16GiB");
  }
  const double start = parse_bytes_flag(flag, parts[0]);
  const double stop = parse_bytes_flag(flag, parts[1]);
  const double step = parse_bytes_flag(flag, parts[2]);
  if (stop < start) throw InputError("command line", flag, text, "STOP at least START");
  // Checked before the count: an infinite STOP would make it NaN and the sweep empty.
  const Range& range = limits::memory_limit_bytes;
  if (start < range.min || stop > range.max) {
    throw InputError(
        "command line", flag, text,
        "START and STOP memory limits " + describe_range(range, units::Dimension::bytes));
  }
  const double count = std::floor((stop - start) / step * (1.0 + 1e-12)) + 1.0;
  if (!(count <= max_points)) {
    throw InputError("command line", flag, text,
                     fmt::format("at most {} memory limits (a larger STEP)", max_points));
  }
  std::vector<double> limits;
  for (int i = 0; i < static_cast<int>(count); ++i) limits.push_back(start + i * step);
  return limits;
}

void add_scenario_options(CLI::App& app, ScenarioOptions& options, bool with_memory_limit,
                          bool scenario_required) {
  CLI::Option* scenario =
      app.add_option("scenario", options.scenario_path, "Scenario JSON file (see scenarios/)");
  if (scenario_required) scenario->required();
  if (with_memory_limit) {
    app.add_option("--memory-limit", options.memory_limit,
                   "Per-GPU memory limit, e.g. 8GiB (default: the scenario's training, else the "
                   "GPU's memory)");
  }
  app.add_option(
      "--modes", options.modes,
      "Modes the search may use, among dp,zdp,z1,z2,hsdp (default: the scenario's, else dp,zdp)");
  app.add_option(
      "--split", options.split,
      "Operator split granularity: 1, 2, 4, 8 or auto (default: the scenario's, else 1)");
  app.add_option("--checkpoint", options.checkpoint,
                 "Activation checkpointing: off, on or auto (default: the scenario's, else off)");
  app.add_option("--units", options.units,
                 "FSDP units: off (one per operator), block (one per transformer block) or auto "
                 "(the best of several wrappings); default: the scenario's, else off");
  app.add_option("--min-unit-params", options.min_unit_params,
                 "Parameters per unit of the size-based wrapping (fsdp_min_params, --units auto); "
                 "default 1e8");
  app.add_option("--offload", options.offload,
                 "CPU offload of the sharded modes' states: off, on (every sharded operator) or "
                 "auto (chosen per operator); default: the scenario's, else off");
  app.add_option("--cost-model", options.cost_model,
                 "Cost model: paper or extended (default: the scenario's, else extended)");
  app.add_option("--gap", options.gap,
                 "Stop once no plan can be this fraction faster (default 1e-4; 0: exact)");
  app.add_option("--time-limit", options.time_limit,
                 "Search time budget, e.g. 30s (default 10s); then the best plan so far");
  app.add_option("--micro-batch", options.micro_batch,
                 "Micro-batch per rank (default: the scenario's batch-size range, searched)");
  app.add_option("--accumulation", options.accumulation,
                 "Micro-batches per rank per iteration (default: the scenario's, or what "
                 "--global-batch needs)");
  app.add_option("--global-batch", options.global_batch,
                 "Samples per iteration over all ranks: the scheduler picks micro-batch x "
                 "accumulation to reach it");
  app.add_option("--precision", options.precision,
                 "fp32, mixed (fp16/bf16 compute, fp32 master and optimizer states), amp_bf16 "
                 "(mixed, gradients reduced in fp32) or bf16 (mixed, reduced in bf16); default: "
                 "the scenario's");
  app.add_option("--seq-len", options.seq_len,
                 "Sequence length of the scenario's generated GPT (default: the scenario's)");
  app.add_flag("--force", options.force,
               "Run even when the estimated work is far beyond a few minutes or would hold more "
               "than 4 GiB");
}

std::vector<std::pair<std::string, std::string>> overrides_given(const ScenarioOptions& options,
                                                                 bool search_only) {
  struct Flag {
    const std::string* value;
    const char* name;
    bool search;  // the data-parallel search's own
  };
  const Flag flags[] = {{&options.memory_limit, "--memory-limit", false},
                        {&options.modes, "--modes", true},
                        {&options.split, "--split", true},
                        {&options.checkpoint, "--checkpoint", true},
                        {&options.cost_model, "--cost-model", true},
                        {&options.gap, "--gap", true},
                        {&options.time_limit, "--time-limit", true},
                        {&options.units, "--units", true},
                        {&options.offload, "--offload", true},
                        {&options.min_unit_params, "--min-unit-params", true},
                        {&options.micro_batch, "--micro-batch", false},
                        {&options.accumulation, "--accumulation", false},
                        {&options.global_batch, "--global-batch", false},
                        {&options.precision, "--precision", false},
                        {&options.seq_len, "--seq-len", false}};
  std::vector<std::pair<std::string, std::string>> given;
  for (const Flag& flag : flags) {
    if (!flag.value->empty() && (flag.search || !search_only)) {
      given.emplace_back(flag.name, *flag.value);
    }
  }
  return given;
}

std::optional<std::pair<std::string, std::string>> first_override_given(
    const ScenarioOptions& options) {
  const auto given = overrides_given(options);
  if (given.empty()) return std::nullopt;
  return given.front();
}

std::vector<std::string> files_read(const Scenario& scenario, std::vector<std::string> more) {
  more.insert(more.end(),
              {scenario.file, scenario.model_source.file, scenario.cluster_source.file});
  return more;
}

void refuse_output_over_input(const std::string& flag, const std::string& output,
                              const std::vector<std::string>& inputs) {
  if (const auto input = input_named_by(output, inputs)) {
    throw InputError(
        command_line, flag, output,
        "an output path that is none of the files this command reads (it is " + *input + ")");
  }
}

Scenario load_checked_scenario(const std::string& path) {
  Scenario scenario = load_scenario(path);
  if (scenario.validation.is_object()) {
    try {
      (void)validate::read_validation_options(scenario);
    } catch (const InputError& error) {
      // "device": "cuda" in a build without the CUDA path is this build's limit, not a fault of
      // the file, and only `validate` runs a device (the device is read last: all else passed).
      if (error.json_path() != "$.validation.device") throw;
    }
  }
  return scenario;
}

std::unique_ptr<const Scenario> load_with_overrides(const ScenarioOptions& options) {
  auto scenario = std::make_unique<Scenario>(load_checked_scenario(options.scenario_path));
  if (!options.memory_limit.empty()) {
    const double limit = parse_bytes_flag("--memory-limit", options.memory_limit);
    check_memory_limit_flag("--memory-limit", options.memory_limit, limit, *scenario);
    scenario->training.memory_limit_bytes = limit;
  }
  apply_search_overrides(options, *scenario);
  apply_training_overrides(options, *scenario);
  return scenario;
}

std::string describe_search(const Scenario& scenario) {
  std::string split;
  for (int k : scenario.search.granularities)
    split += (split.empty() ? "" : ",") + std::to_string(k);
  std::string units = scenario.search.units == SearchSpec::UnitsPolicy::off
                          ? ""
                          : fmt::format("  units {}", units_policy_name(scenario.search.units));
  if (scenario.search.offload != SearchSpec::OffloadPolicy::off) {
    units += fmt::format("  offload {}", offload_policy_name(scenario.search.offload));
  }
  return fmt::format("modes {}  split {}  checkpoint {}{}  cost model {}",
                     join_modes(scenario.search.modes), split,
                     checkpoint_policy_name(scenario.search.checkpoint), units,
                     cost_model_name(scenario.cost.kind));
}

std::vector<double> sweep_memory_limits(const std::string& text, int max_points,
                                        const Scenario& scenario) {
  if (!text.empty()) {
    std::vector<double> limits = parse_memory_limits(text, max_points);
    for (double limit : limits) check_memory_limit_flag("--memory-limits", text, limit, scenario);
    return limits;
  }
  const auto& gpu_bytes = scenario.cluster.gpu.memory_bytes;
  const auto& training_bytes = scenario.training.memory_limit_bytes;
  if (!gpu_bytes && !training_bytes) {
    throw InputError(command_line, "--memory-limits", "nothing",
                     "memory limits to sweep, e.g. 4GiB:24GiB:1GiB (the cluster declares no GPU "
                     "memory to sweep up to, and the training no memory limit)");
  }
  const double top_bytes = gpu_bytes ? *gpu_bytes : 2 * *training_bytes;
  constexpr int default_steps = 16;
  std::vector<double> limits;
  for (int step = 1; step <= default_steps; ++step) {
    limits.push_back(top_bytes * step / default_steps);
  }
  return limits;
}

}  // namespace osdp::cli
