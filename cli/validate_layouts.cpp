#include "cli/validate_layouts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/parallel_iteration.hpp"

namespace osdp::cli {
namespace {

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// "12" -> 12; nullopt unless 1..4096 in plain digits.
std::optional<int> small_count(const std::string& digits) {
  if (digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  const int value = std::stoi(digits);
  if (value < 1 || value > 4096) return std::nullopt;
  return value;
}

ParallelRun parse_layout(const std::string& flag, const std::string& item, int ranks,
                         int micro_batch, int layers) {
  const std::string expected =
      "a layout such as tp2, pp2:gpipe:m4 or tp2xdp2:z1 (axes tp<N>, pp<N>, dp<N> joined by x, "
      "then :gpipe or :1f1b, :m<micro-batches> and :z1 for ZeRO-1 in the data-parallel group)";
  auto refuse = [&](const std::string& why) -> InputError {
    return InputError("command line", flag, item, why.empty() ? expected : why);
  };
  const std::vector<std::string> parts = split_on(item, ':');
  ParallelRun run;
  int tensor = 1, pipeline = 1;
  std::optional<int> data;
  for (const std::string& axis : split_on(parts.front(), 'x')) {
    const std::optional<int> degree = axis.size() > 2 ? small_count(axis.substr(2)) : std::nullopt;
    const std::string name = axis.substr(0, 2);
    if (!degree || (name != "tp" && name != "pp" && name != "dp")) throw refuse("");
    (name == "tp" ? tensor : name == "pp" ? pipeline : data.emplace()) = *degree;
  }
  std::optional<int> micro_batches;
  std::optional<Mode> data_mode;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "z1" || parts[i] == "dp") {
      data_mode = parts[i] == "z1" ? Mode::z1 : Mode::dp;
    } else if (const auto schedule = pipeline_schedule_from_name(parts[i]);
               schedule && *schedule != PipelineSchedule::interleaved) {
      run.schedule = *schedule;
    } else if (parts[i].size() > 1 && parts[i][0] == 'm' && small_count(parts[i].substr(1))) {
      micro_batches = small_count(parts[i].substr(1));
    } else {
      throw refuse("");
    }
  }
  if (ranks % (tensor * pipeline) != 0) {
    throw refuse(fmt::format("tensor x pipeline degrees that divide the {} ranks", ranks));
  }
  const int data_degree = data.value_or(ranks / (tensor * pipeline));
  if (tensor * pipeline * data_degree != ranks) {
    throw refuse(fmt::format("tp x pp x dp = the {} ranks (here {})", ranks,
                             tensor * pipeline * data_degree));
  }
  if (pipeline > layers + 2) {
    throw refuse(
        fmt::format("at most {} pipeline stages (the model's {} layers, embedding and "
                    "head)",
                    layers + 2, layers));
  }
  run.degrees = {tensor, pipeline, data_degree};
  run.micro_batch = micro_batch;
  run.micro_batches = micro_batches.value_or(pipeline > 1 ? 2 * pipeline : 1);
  // The model's split, stated, so that the runtime runs the stages the model costs.
  run.layers_per_chunk = even_layer_split(layers, pipeline);
  // As the runtime transfers: each tensor rank sends its whole activation to its peer of the
  // next stage, and a send returns at once (only receives wait).
  run.scatter_gather_transfers = false;
  run.blocking_transfers = false;
  // ZeRO-1 inside the layout (DeepSpeed 3D): every operator of the tensor-parallel GPT
  // (embedding, attention and MLP per layer, head) shards its optimizer states.
  if (data_mode == Mode::z1) run.modes.assign(2 * layers + 2, Mode::z1);
  return run;
}

std::string run_name(std::string item) {
  std::replace(item.begin(), item.end(), ':', '-');
  return item;
}

}  // namespace

std::vector<validate::PlanRun> parse_layouts(const std::string& flag, const std::string& text,
                                             const Scenario& scenario, int ranks, int micro_batch) {
  if (!scenario.gpt) {
    throw InputError(scenario.file, "$.model", "an operator list",
                     "a generated GPT model for tensor and pipeline layouts");
  }
  std::vector<validate::PlanRun> runs;
  for (const std::string& item : split_on(text, ',')) {
    if (item.empty()) throw InputError("command line", flag, text, "no empty layout in the list");
    validate::PlanRun run;
    run.name = run_name(item);
    run.layout = parse_layout(flag, item, ranks, micro_batch, scenario.gpt->layers);
    run.plan.batch_size = micro_batch;
    runs.push_back(std::move(run));
  }
  return runs;
}

validate::SimulatedFigures predict_layout(const Scenario& scenario, const ParallelRun& run,
                                          const std::string& source) {
  const ParallelIterationCost cost = parallel_iteration_cost(
      *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, run, source);
  // The busiest stage's compute: its chunks' passes without their communication, m times.
  std::vector<double> compute_by_stage(run.degrees.pipeline, 0.0);
  for (const ChunkCost& chunk : cost.chunks) {
    compute_by_stage[chunk.stage] +=
        run.micro_batches *
        (chunk.forward_s - chunk.forward_communication_s - chunk.forward_data_parallel_s +
         chunk.backward_s - chunk.backward_communication_s - chunk.backward_data_parallel_s);
  }
  double busiest_s = 0;
  for (std::size_t stage = 0; stage < cost.stages.size(); ++stage) {
    busiest_s = std::max(busiest_s, compute_by_stage[stage] + cost.stages[stage].optimizer_step_s);
  }
  validate::SimulatedFigures figures;
  figures.iteration_time_s = cost.iteration_time_s;
  figures.peak_memory_bytes = cost.peak_memory_bytes;
  figures.exposed_communication_s = std::max(0.0, cost.iteration_time_s - busiest_s);
  return figures;
}

}  // namespace osdp::cli
