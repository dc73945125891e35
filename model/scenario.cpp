#include "model/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/mode.hpp"
#include "model/wrapping.hpp"

namespace osdp {
namespace {

// The schedule keys of a scenario's "simulation" object, for the cost model to predict the
// iteration the simulator runs (sim/options reads the whole object strictly).
CostSettings::Overlap read_overlap_schedule(const JsonReader& reader) {
  CostSettings::Overlap schedule;
  schedule.forward_prefetch = reader.optional_integer("forward_prefetch", 0, 64).value_or(1) > 0;
  schedule.backward_prefetch = read_backward_prefetch(reader, "backward_prefetch");
  schedule.separate_reduction_lane =
      reader.optional_boolean("separate_reduce_scatter_lane").value_or(false);
  schedule.all_reduce_after_backward =
      reader.has("gradient_all_reduce") &&
      reader.choice("gradient_all_reduce", {"per_operator", "after_backward"}) == "after_backward";
  schedule.slowdown = reader.optional_number("overlap_slowdown", limits::slowdown);
  schedule.kernel_launch_s =
      reader.optional_quantity("kernel_launch", units::Dimension::seconds, false);
  return schedule;
}

namespace fs = std::filesystem;
using units::Dimension;

// Splits "a,b,c".
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

// A key that holds an object or a path (relative to the scenario file) to a JSON file with it.
struct Included {
  Json document;
  std::string file;
};

Included include(const JsonReader& reader, const std::string& key) {
  const Json& value = reader.raw(key);
  if (value.is_string()) {
    fs::path path = value.get<std::string>();
    if (path.is_relative() && !reader.file().empty()) {
      path = fs::path(reader.file()).parent_path() / path;
    }
    // A symlink loop or a name too long is an input error, not a filesystem exception.
    std::error_code error;
    const bool exists = fs::exists(path, error);
    if (error) {
      reader.fail(key, "an object or the path of a readable JSON file (" + error.message() + ")");
    }
    if (!exists) reader.fail(key, "an object or the path of an existing JSON file");
    if (fs::is_directory(path, error)) {
      reader.fail_value(key, value.dump(), "an object or the path of a JSON file, not a directory");
    }
    return {read_json_file(path.string()), path.string()};
  }
  if (!value.is_object()) reader.fail(key, "an object or the path of a JSON file");
  return {value, reader.file()};
}

// A memory limit above the GPU's own memory is a unit slip: no plan can use what is not there.
void check_memory_limit(const Scenario& scenario, const std::string& file) {
  const auto& limit = scenario.training.memory_limit_bytes;
  const auto& memory = scenario.cluster.gpu.memory_bytes;
  if (limit && memory && *limit > *memory) {
    throw InputError(file, "$.training.memory_limit", units::format_bytes(*limit),
                     fmt::format("at most the GPU's memory ({})", units::format_bytes(*memory)));
  }
}

// A fixed global batch must be reachable: some micro-batch of the range times the ranks divides it.
void check_global_batch(const Scenario& scenario, const std::string& file) {
  const Training& training = scenario.training;
  if (!training.global_batch_size) return;
  for (int b = training.min_batch_size; b <= training.max_batch_size; ++b) {
    if (training.accumulation_for(b, scenario.cluster.ranks)) return;
  }
  throw InputError(
      file, "$.training.global_batch_size", std::to_string(*training.global_batch_size),
      fmt::format("a multiple of micro-batch x {} ranks for some micro-batch in {}..{}",
                  scenario.cluster.ranks, training.min_batch_size, training.max_batch_size));
}

// Each operator's time comes from the model (compute_s_per_sample) or from the GPU's rate; a
// model given by its shape has no times of its own, so the cluster is the one to blame.
void check_operator_times(const Scenario& scenario) {
  if (scenario.cluster.gpu.compute_flops_per_s) return;
  for (int i = 0; i < scenario.workload->size(); ++i) {
    if (scenario.workload->op(i).compute_s_per_sample) continue;
    const JsonSource& cluster = scenario.cluster_source;
    if (scenario.gpt) {
      const bool has_gpu =
          scenario.cluster_document.is_object() && scenario.cluster_document.contains("gpu");
      throw InputError(
          cluster.file, cluster.path(has_gpu ? "gpu.compute" : "gpu"), "nothing",
          fmt::format("{} with a \"compute\" rate: the model \"{}\" is given by "
                      "its shape, so its operators' times come from the GPU's rates",
                      has_gpu ? "a GPU" : "a \"gpu\" block", scenario.workload->name()));
    }
    throw InputError(
        scenario.model_source.file,
        scenario.model_source.path(fmt::format("operators[{}].compute_s_per_sample", i)), "nothing",
        fmt::format("compute_s_per_sample for each operator, or a GPU \"compute\" rate in the "
                    "cluster ({})",
                    cluster.file));
  }
}

// Every input is within its range, but together they must still give finite, positive figures:
// an all-DP iteration at the smallest batch size is the reference (it always exists).
void check_figures_finite(const Scenario& scenario, const CostModel& costs,
                          const std::string& file) {
  Plan plan;
  plan.batch_size = scenario.training.min_batch_size;
  plan.choices.assign(scenario.workload->size(), OperatorChoice{});
  const PlanCost cost = costs.plan_cost(plan);
  // Below a nanosecond an iteration is a unit slip (1e-300 s per sample), and its throughput
  // would print with hundreds of digits.
  constexpr double least_iteration_s = 1e-9;
  const bool time_ok =
      std::isfinite(cost.iteration_time_s) && cost.iteration_time_s >= least_iteration_s;
  if (!time_ok) {
    throw InputError(file, "$.model",
                     fmt::format("an iteration time of {:g} s", cost.iteration_time_s),
                     "operators with some compute time, FLOPs or parameters, and cluster rates "
                     "that give a finite iteration time of at least 1 ns");
  }
  const bool memory_ok = std::isfinite(cost.peak_memory_bytes) && cost.peak_memory_bytes > 0.0;
  if (!memory_ok) {
    throw InputError(file, "$.model",
                     fmt::format("a peak memory of {} bytes", cost.peak_memory_bytes),
                     "operators with some parameters or activations (a finite, positive memory "
                     "need)");
  }
}

}  // namespace

std::optional<std::vector<Mode>> parse_modes(const std::string& text) {
  std::vector<Mode> modes;
  for (const auto& item : split_list(text)) {
    const auto mode = mode_from_name(item);
    if (!mode) return std::nullopt;
    bool seen = false;
    for (Mode existing : modes) seen = seen || existing == *mode;
    if (!seen) modes.push_back(*mode);
  }
  if (modes.empty()) return std::nullopt;
  return modes;
}

std::optional<std::vector<int>> parse_split(const std::string& text) {
  if (text == "auto") return std::vector<int>{1, 2, 4, 8};
  for (int k : {1, 2, 4, 8}) {
    if (text == std::to_string(k)) return k == 1 ? std::vector<int>{1} : std::vector<int>{1, k};
  }
  return std::nullopt;
}

std::optional<SearchSpec::CheckpointPolicy> parse_checkpoint_policy(const std::string& text) {
  if (text == "off") return SearchSpec::CheckpointPolicy::off;
  if (text == "on") return SearchSpec::CheckpointPolicy::on;
  if (text == "auto") return SearchSpec::CheckpointPolicy::automatic;
  return std::nullopt;
}

std::optional<SearchSpec::OffloadPolicy> parse_offload_policy(const std::string& text) {
  if (text == "off") return SearchSpec::OffloadPolicy::off;
  if (text == "on") return SearchSpec::OffloadPolicy::on;
  if (text == "auto") return SearchSpec::OffloadPolicy::automatic;
  return std::nullopt;
}

std::string_view offload_policy_name(SearchSpec::OffloadPolicy policy) {
  switch (policy) {
    case SearchSpec::OffloadPolicy::off:
      return "off";
    case SearchSpec::OffloadPolicy::on:
      return "on";
    case SearchSpec::OffloadPolicy::automatic:
      return "auto";
  }
  return "?";
}

std::optional<SearchSpec::UnitsPolicy> parse_units_policy(const std::string& text) {
  if (text == "off") return SearchSpec::UnitsPolicy::off;
  if (text == "block") return SearchSpec::UnitsPolicy::block;
  if (text == "auto") return SearchSpec::UnitsPolicy::automatic;
  return std::nullopt;
}

std::string_view units_policy_name(SearchSpec::UnitsPolicy policy) {
  switch (policy) {
    case SearchSpec::UnitsPolicy::off:
      return "off";
    case SearchSpec::UnitsPolicy::block:
      return "block";
    case SearchSpec::UnitsPolicy::automatic:
      return "auto";
  }
  return "?";
}

CostModel Scenario::cost_model() const {
  CostSettings settings = cost;
  for (int k : search.granularities) settings.finest_split = std::max(settings.finest_split, k);
  return CostModel(*workload, cluster, training, settings);
}

CostModel Scenario::cost_model_for(const Plan& plan) const {
  CostSettings settings = cost;
  settings.finest_split = finest_split(plan);
  return CostModel(*workload, cluster, training, settings);
}

Scenario Scenario::for_plan(const Plan& plan) const {
  Scenario scenario = *this;
  // A plan of FSDP units is costed, simulated and explained on the model of its units (once:
  // a scenario already wrapped by the plan is not wrapped again).
  if (wraps(plan, *workload)) {
    scenario.workload = std::make_shared<const Workload>(wrap_workload(*workload, plan.unit_sizes));
  }
  scenario.training =
      training.for_micro_batch(plan.batch_size, cluster.ranks, plan.accumulation_steps);
  scenario.training.global_batch_size.reset();  // the plan's micro-batch and steps are fixed
  return scenario;
}

// A cluster, model or plan file given where a scenario goes (the usual slip: `osdp plan
// cluster.json`): said as such, not as an unknown key of a scenario.
void refuse_other_kind_of_file(const JsonReader& reader) {
  if (reader.has("model") || reader.has("cluster")) return;
  const auto kind = [&]() -> std::string {
    if (reader.has("topology") || reader.has("gpu") || reader.has("collective")) return "cluster";
    if (reader.has("choices") || reader.has("batch_size")) return "plan";
    if (reader.has("family") || reader.has("operators")) return "model";
    return "";
  }();
  if (kind.empty()) return;
  reader.fail_value("", "a " + kind + " file",
                    "a scenario (with \"model\" and \"cluster\"); a " + kind + " file goes " +
                        (kind == "plan" ? std::string("after --plan")
                                        : "in a scenario's \"" + kind + "\" (its path or object)"));
}

Scenario scenario_from_json(const Json& document, const std::string& file) {
  const JsonReader reader(document, file);
  refuse_other_kind_of_file(reader);
  reader.require_only({"name", "description", "model", "cluster", "training", "cost_model",
                       "search", "simulation", "validation", "measured_runs"});
  Scenario scenario;
  scenario.file = file;
  scenario.name = reader.optional_name("name").value_or(
      file.empty() ? std::string("scenario") : fs::path(file).stem().string());
  scenario.description = reader.optional_string("description").value_or("");

  if (reader.has("training")) {
    const Included training = include(reader, "training");
    scenario.training = load_training(
        JsonReader(training.document, training.file, training.file == file ? "$.training" : "$"));
  }
  if (!reader.has("cluster")) reader.fail("cluster", "a cluster (object or file path)");
  const Included cluster = include(reader, "cluster");
  scenario.cluster_source = {cluster.file, cluster.file == file ? "$.cluster" : "$"};
  scenario.cluster =
      load_cluster(JsonReader(cluster.document, cluster.file, scenario.cluster_source.root));
  if (!reader.has("model")) reader.fail("model", "a model (object or file path)");
  const Included model = include(reader, "model");
  scenario.model_source = {model.file, model.file == file ? "$.model" : "$"};
  const JsonReader model_reader(model.document, model.file, scenario.model_source.root);
  scenario.workload = std::make_shared<const Workload>(load_model(model_reader, scenario.training));
  if (model_reader.has("family")) scenario.gpt = read_gpt_spec(model_reader);
  scenario.cluster_document = cluster.document;

  if (reader.has("cost_model")) {
    scenario.cost.kind = reader.choice("cost_model", {"paper", "extended"}) == "paper"
                             ? CostModelKind::paper
                             : CostModelKind::extended;
  }
  if (reader.has("search")) {
    const JsonReader search = reader.object("search");
    search.require_only({"modes", "split", "checkpoint", "optimality_gap", "time_limit", "units",
                         "min_unit_parameters", "offload"});
    if (search.has("modes")) {
      const Json& modes = search.raw("modes");
      std::string joined;
      if (modes.is_array()) {
        for (const auto& mode : modes) {
          if (!mode.is_string()) search.fail("modes", "a list of modes among " + mode_names());
          joined += mode.get<std::string>() + ",";
        }
      } else if (modes.is_string()) {
        joined = modes.get<std::string>();
      }
      const auto parsed = parse_modes(joined);
      if (!parsed) search.fail("modes", "a list of modes among " + mode_names());
      scenario.search.modes = *parsed;
    }
    if (search.has("split")) {
      const Json& split = search.raw("split");
      const auto parsed = parse_split(split.is_string() ? split.get<std::string>() : split.dump());
      if (!parsed) search.fail("split", "1, 2, 4, 8 or \"auto\"");
      scenario.search.granularities = *parsed;
    }
    if (search.has("checkpoint")) {
      const auto parsed =
          parse_checkpoint_policy(search.choice("checkpoint", {"off", "on", "auto"}));
      scenario.search.checkpoint = *parsed;
    }
    if (search.has("optimality_gap")) {
      const double gap = search.non_negative_number("optimality_gap");
      if (gap >= 0.5)
        search.fail("optimality_gap",
                    "a fraction of the iteration time below 0.5 (1e-4 by default; 0: exact)");
      scenario.search.optimality_gap = gap;
    }
    if (search.has("time_limit")) {
      scenario.search.time_limit_s =
          search.quantity("time_limit", units::Dimension::seconds, limits::time_limit_s);
    }
    if (search.has("units")) {
      scenario.search.units = *parse_units_policy(search.choice("units", {"off", "block", "auto"}));
    }
    if (search.has("offload")) {
      scenario.search.offload =
          *parse_offload_policy(search.choice("offload", {"off", "on", "auto"}));
    }
    if (search.has("min_unit_parameters")) {
      scenario.search.min_unit_parameters =
          search.number("min_unit_parameters", {1.0, 1e15, "a parameter count from 1 to 1e15"});
    }
  }
  if (reader.has("simulation")) {
    // Must be an object; sim/ checks its keys. The cost model reads the schedule it predicts.
    const JsonReader simulation = reader.object("simulation");
    scenario.simulation = document["simulation"];
    scenario.cost.overlap = read_overlap_schedule(simulation);
    if (scenario.cost.overlap.slowdown && scenario.cluster.host_cores) {
      simulation.fail_value("overlap_slowdown", fmt::format("{}", *scenario.cost.overlap.slowdown),
                            "no overlap slowdown on a cluster whose ranks share the host's cores "
                            "(the sharing makes it)");
    }
  }
  if (reader.has("measured_runs")) {
    (void)reader.object("measured_runs");  // must be an object; measured_runs.cpp checks its keys
    scenario.measured_runs = document["measured_runs"];
  }
  if (reader.has("validation")) {
    (void)reader.object("validation");  // must be an object; validate/ checks its keys
    scenario.validation = document["validation"];
  }

  // Cross-checks that need all three parts.
  const CostModel costs = scenario.cost_model();
  try {
    (void)costs.memory_limit_bytes();
  } catch (const InputError&) {
    throw InputError(file, "$.training.memory_limit", "nothing",
                     "a memory limit in training, or \"memory\" in the cluster's gpu");
  }
  check_operator_times(scenario);
  check_memory_limit(scenario, file);
  check_global_batch(scenario, file);
  check_figures_finite(scenario, costs, file);
  for (Mode mode : scenario.search.modes) {
    if (!mode_fits_cluster(mode, scenario.cluster)) {
      throw InputError(
          file, "$.search.modes", fmt::format("\"{}\"", mode_name(mode)),
          fmt::format("{} only on {}", mode_name(mode), mode_cluster_requirement(mode)));
    }
  }
  return scenario;
}

Scenario load_scenario(const std::string& path) {
  return scenario_from_json(read_json_file(path), path);
}

}  // namespace osdp
