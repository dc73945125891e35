// `osdp explain SCENARIO --tp/--pp/--schedule`: the teaching view of a 3D layout. The layout the
// search chose and why (the best of every tensor x pipeline degree beside it), each stage's
// memory by part and its time (busy, idle in the bubble, gradient reductions), and what each
// axis costs.
#include <fmt/format.h>

#include <algorithm>

#include "cli/command.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "model/input_error.hpp"
#include "model/units.hpp"

namespace osdp::cli {
namespace {

std::vector<int> divisors_of(int n) {
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return divisors;
}

// The best 3d_osdp layout at one tensor x pipeline degree (the other axes as the flags fix
// them), or nothing when none fits there.
struct Alternative {
  int tensor = 1;
  int pipeline = 1;
  std::optional<LayoutPlan> best;
  double least_memory_needed_bytes = 0;
};

std::vector<Alternative> alternatives(const Scenario& scenario, const LayoutSearchOptions& fixed) {
  const GptSpec& spec = *scenario.gpt;
  const int gpus = scenario.cluster.ranks;
  const int node_gpus = scenario.cluster.topology ? scenario.cluster.topology->node.gpus
                                                  : scenario.cluster.gpus_per_node;
  std::vector<Alternative> found;
  for (int tensor : divisors_of(gpus)) {
    if (fixed.tensor ? tensor != *fixed.tensor : tensor > node_gpus || spec.heads % tensor != 0) {
      continue;
    }
    for (int pipeline : divisors_of(gpus / tensor)) {
      if (fixed.pipeline ? pipeline != *fixed.pipeline : pipeline > spec.layers) continue;
      LayoutSearchOptions options = fixed;
      options.tensor = tensor;
      options.pipeline = pipeline;
      const LayoutSearchResult result = search_layouts(scenario, options);
      found.push_back(
          {tensor, pipeline, result.strategies.front().second, result.least_memory_needed_bytes});
    }
  }
  return found;
}

double tensor_communication_s(const ParallelIterationCost& cost) {
  double seconds = 0;
  for (const ChunkCost& chunk : cost.chunks) {
    seconds += chunk.forward_communication_s + chunk.backward_communication_s;
  }
  return seconds;
}

std::string alternatives_table(const std::vector<Alternative>& found, const LayoutPlan& chosen) {
  Table table({{"tp x pp x dp"},
               {"schedule"},
               {"micro x m", Table::Align::right},
               {"ckpt"},
               {"data-parallel modes"},
               {"throughput", Table::Align::right},
               {"vs chosen", Table::Align::right},
               {"peak", Table::Align::right}});
  for (const Alternative& alternative : found) {
    if (!alternative.best) {
      table.add_row(
          {fmt::format("{} x {} x -", alternative.tensor, alternative.pipeline), "does not fit", "",
           "", "", "", "",
           fmt::format("needs {}", units::format_bytes(alternative.least_memory_needed_bytes))});
      continue;
    }
    const LayoutPlan& plan = *alternative.best;
    const bool is_chosen = plan.run.degrees.tensor == chosen.run.degrees.tensor &&
                           plan.run.degrees.pipeline == chosen.run.degrees.pipeline;
    table.add_row(
        {degrees_text(plan.run) + (is_chosen ? "  <- chosen" : ""), schedule_text(plan.run),
         fmt::format("{} x {}", plan.run.micro_batch, plan.run.micro_batches),
         plan.run.checkpointed_kinds.empty() ? "no" : "yes", modes_summary(plan),
         format_throughput(plan.throughput_samples_per_s),
         fmt::format("{:+.1f} %",
                     100.0 * (plan.throughput_samples_per_s / chosen.throughput_samples_per_s - 1)),
         units::format_bytes(plan.peak_memory_bytes)});
  }
  return table.render();
}

std::string stages_table(const ParallelIterationCost& cost, const LayoutPlan& plan) {
  Table table({{"stage", Table::Align::right},
               {"layers", Table::Align::right},
               {"parameters", Table::Align::right},
               {"model states", Table::Align::right},
               {"activations", Table::Align::right},
               {"transient", Table::Align::right},
               {"peak", Table::Align::right},
               {"busy", Table::Align::right},
               {"idle", Table::Align::right},
               {"reductions", Table::Align::right},
               {"zdp layers", Table::Align::right}});
  for (std::size_t r = 0; r < cost.stages.size(); ++r) {
    const StageCost& stage = cost.stages[r];
    table.add_row({std::to_string(r), std::to_string(stage_layer_count(cost, static_cast<int>(r))),
                   format_count(stage.parameters), units::format_bytes(stage.model_state_bytes),
                   fmt::format("{} ({} in flight)", units::format_bytes(stage.activation_bytes),
                               stage.peak_in_flight),
                   units::format_bytes(stage.transient_bytes),
                   units::format_bytes(stage.peak_memory_bytes),
                   units::format_seconds(cost.timeline.busy_s[r]),
                   units::format_seconds(cost.pipeline_s - cost.timeline.busy_s[r]),
                   units::format_seconds(stage.gradient_reduce_s),
                   std::to_string(plan.zdp_layers_per_stage[r])});
  }
  return table.render();
}

// What each axis of this layout costs, in the layout's own figures: a paragraph each.
std::string axes_text(const ParallelIterationCost& cost, const LayoutPlan& plan) {
  const ParallelRun& run = plan.run;
  auto paragraph = [](const std::string& line) {
    return "  " + wrap_words(line, 98, "    ") + "\n";
  };
  std::string text = "\nWhat each axis costs here:\n";
  if (run.degrees.tensor > 1) {
    text += paragraph(fmt::format(
        "tensor {}: every layer's parameters and activations split {} ways (attention by heads, "
        "MLP by hidden units); 2 all-reduces of the b x s x h activations per layer in forward "
        "and 2 in backward{} on the compute stream: {} per micro-batch over all chunks",
        run.degrees.tensor, run.degrees.tensor,
        run.checkpointed_kinds.empty() ? "" : " (2 more in the recompute)",
        units::format_seconds(tensor_communication_s(cost))));
  } else {
    text += paragraph("tensor 1: no tensor split, no per-layer all-reduces");
  }
  if (run.degrees.pipeline > 1) {
    const double ideal = ideal_bubble_ratio(run.schedule, run.degrees.pipeline,
                                            run.chunks_per_stage, run.micro_batches);
    text += paragraph(fmt::format(
        "pipeline {}: {} micro-batches through {} stages ({}); each boundary moves {} per "
        "micro-batch each way ({}); the bubble is {} of the pipeline (equal stages and free "
        "transfers would give (p - 1) / {}m = {} of the ideal time)",
        run.degrees.pipeline, run.micro_batches, run.degrees.pipeline, schedule_text(run),
        units::format_bytes(cost.transfer_bytes), units::format_seconds(cost.transfer_s),
        format_percent(cost.timeline.bubble_fraction()),
        run.schedule == PipelineSchedule::interleaved ? "v " : "", format_percent(ideal)));
  } else {
    text += paragraph("pipeline 1: every rank holds every layer; no bubble");
  }
  double reduce_s = 0;
  for (const StageCost& stage : cost.stages) reduce_s = std::max(reduce_s, stage.gradient_reduce_s);
  const bool any_zdp = std::any_of(plan.zdp_layers_per_stage.begin(),
                                   plan.zdp_layers_per_stage.end(), [](int n) { return n > 0; });
  text += paragraph(fmt::format(
      "data {}: replicas of each stage, {} samples an iteration in all; after its last backward "
      "each stage reduces its gradients ({} mode{}): up to {} beyond the pipeline",
      run.degrees.data, cost.samples_per_iteration, mode_name(plan.base_mode),
      any_zdp ? ", zdp layers gathered for every pass" : "", units::format_seconds(reduce_s)));
  return text;
}

}  // namespace

int explain_layout(const Scenario& scenario, const LayoutSearchOptions& options, bool json,
                   bool force) {
  // The best layout's search, then one for each tensor x pipeline degree beside it.
  const LayoutSearchRun run = run_layout_search(scenario, options, force, 2);
  const std::optional<LayoutPlan>& best = run.result.strategies.front().second;
  if (!best) {
    if (json) {
      fmt::print("{}\n", layout_search_json(scenario, run, {}).dump(2));
      return exit_infeasible;
    }
    return report_no_layout_fits(scenario, run);
  }
  const ParallelIterationCost cost = layout_cost(scenario, *best);
  const std::vector<Alternative> found = alternatives(scenario, options);
  if (json) {
    Json alternatives_json = Json::array();
    for (const Alternative& alternative : found) {
      Json entry = layout_plan_json(scenario, "3d_osdp", alternative.best);
      entry["tensor_parallelism"] = alternative.tensor;
      entry["pipeline_parallelism"] = alternative.pipeline;
      if (!alternative.best) {
        entry["least_memory_needed_bytes"] = alternative.least_memory_needed_bytes;
      }
      alternatives_json.push_back(std::move(entry));
    }
    Json document = {{"scenario", scenario.name},
                     {"gpus", scenario.cluster.ranks},
                     {"memory_limit_bytes", run.memory_limit_bytes},
                     {"layout", layout_plan_json(scenario, "3d_osdp", best)},
                     {"pipeline_s", cost.pipeline_s},
                     {"transfer_s", cost.transfer_s},
                     {"transfer_bytes", cost.transfer_bytes},
                     {"tensor_communication_s", tensor_communication_s(cost)},
                     {"iteration_time_s", cost.iteration_time_s},
                     {"stages", layout_stages_json(cost, *best)},
                     {"alternatives", alternatives_json}};
    fmt::print("{}\n", document.dump(2));
    return exit_ok;
  }
  const ParallelRun& layout = best->run;
  std::string text =
      fmt::format("explain {} as a 3D layout: {} on {}, {} GPUs, limit {} per GPU\n\n",
                  scenario.name, scenario.workload->name(), scenario.cluster.name,
                  scenario.cluster.ranks, units::format_bytes(run.memory_limit_bytes));
  text += wrap_words(fmt::format(
      "The layout: tensor x pipeline x data = {}, schedule {}, micro-batch {} x {} micro-batches "
      "per pipeline, checkpointing {}, data-parallel modes {}: {}, iteration {}, peak {}.\n",
      degrees_text(layout), schedule_text(layout), layout.micro_batch, layout.micro_batches,
      layout.checkpointed_kinds.empty() ? "off" : "on", modes_summary(*best),
      format_throughput(best->throughput_samples_per_s),
      units::format_seconds(best->iteration_time_s), units::format_bytes(best->peak_memory_bytes)));
  text += wrap_words(fmt::format(
      "\nWhy this layout: the fastest that fits ({} layouts costed). The best at each tensor x "
      "pipeline degree:\n",
      run.result.evaluations));
  text += alternatives_table(found, *best);
  text += wrap_words(fmt::format(
      "\nStage by stage (memory per GPU: model states + activations of the micro-batches in "
      "flight + the largest transient buffer = peak; time: busy in passes, idle in the "
      "pipeline's {}, then the gradient reductions):\n",
      units::format_seconds(cost.pipeline_s)));
  text += stages_table(cost, *best);
  text += axes_text(cost, *best);
  text += wrap_words(fmt::format(
      "\nIteration {}: the pipeline ({}), each stage's gradient reductions after its last pass "
      "(the latest to end counts), then the optimizer step after the slowest rank.\n",
      units::format_seconds(cost.iteration_time_s), units::format_seconds(cost.pipeline_s)));
  fmt::print("{}", text);
  return exit_ok;
}

}  // namespace osdp::cli
