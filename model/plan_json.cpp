// Reading and writing plans (`osdp plan --json` documents and hand-written plans).
#include "model/plan_json.hpp"

#include <fmt/format.h>

#include "model/mode.hpp"
#include "model/wrapping.hpp"

namespace osdp {

namespace {

std::vector<int> read_unit_sizes(const JsonReader& reader, const Workload& workload) {
  const std::string expected = fmt::format(
      "operators per FSDP unit in execution order: integers >= 1 summing to the model's {} "
      "operators",
      workload.size());
  const Json& units = reader.raw("units");
  if (!units.is_array()) reader.fail("units", expected);
  std::vector<int> sizes;
  for (const Json& size : units) {
    if (!size.is_number_integer() || size.get<long long>() < 1 ||
        size.get<long long>() > workload.size()) {
      reader.fail("units", expected);
    }
    sizes.push_back(static_cast<int>(size.get<long long>()));
  }
  if (!valid_unit_sizes(workload, sizes)) reader.fail("units", expected);
  return sizes;
}

Plan load_choices(const JsonReader& reader, const Workload& workload, const CostModel& cost_model);

}  // namespace

Plan load_plan(const JsonReader& reader, const Workload& workload, const CostModel& cost_model) {
  if (!reader.has("units")) return load_choices(reader, workload, cost_model);
  // A wrapped plan names the units: read its choices against the wrapped model.
  std::vector<int> sizes = read_unit_sizes(reader, workload);
  const Workload wrapped = wrap_workload(workload, sizes);
  const CostModel wrapped_model(wrapped, cost_model.cluster(), cost_model.training(),
                                cost_model.settings());
  Plan plan = load_choices(reader, wrapped, wrapped_model);
  plan.unit_sizes = std::move(sizes);
  return plan;
}

namespace {

// The figures `osdp plan --json` writes beside the choices. osdp recomputes them from the
// choices and never reads them; each still has to be of its kind, so that a hand edit that
// looks like a setting ("cost_model": "paper", "iteration_time_s": "fast") is not silently
// taken for one.
void check_informational_keys(const JsonReader& reader) {
  for (const char* key : {"scenario", "strategy"}) (void)reader.optional_string(key);
  if (reader.has("cost_model")) (void)reader.choice("cost_model", {"paper", "extended"});
  for (const char* key : {"iteration_time_s", "throughput_samples_per_s", "peak_memory_bytes",
                          "memory_limit_bytes", "compute_s", "communication_s",
                          "exposed_communication_s", "search_time_s", "search_proven_gap"}) {
    // null: a figure that was not finite (an unproven gap), as the JSON writer writes it.
    if (reader.has(key) && !reader.raw(key).is_null()) {
      (void)reader.optional_non_negative_number(key);
    }
  }
  (void)reader.optional_boolean("search_stopped_early");
  for (const char* key : {"peak_memory_cause", "simulated"}) {
    if (reader.has(key)) (void)reader.object(key);
  }
  for (const char* key : {"baselines", "runs", "candidates"}) {
    if (reader.has(key) && !reader.raw(key).is_array()) {
      reader.fail(key, "an array (written by osdp plan --json; osdp does not read it)");
    }
  }
}

Plan load_choices(const JsonReader& reader, const Workload& workload, const CostModel& cost_model) {
  // Plans written by `osdp plan --json` carry their figures too; they are read back as-is.
  reader.require_only({"batch_size",
                       "accumulation_steps",
                       "units",
                       "operators",
                       "scenario",
                       "strategy",
                       "iteration_time_s",
                       "throughput_samples_per_s",
                       "peak_memory_bytes",
                       "peak_memory_cause",
                       "memory_limit_bytes",
                       "cost_model",
                       "ranks",
                       "compute_s",
                       "communication_s",
                       "exposed_communication_s",
                       "baselines",
                       "search_time_s",
                       "search_proven_gap",
                       "search_stopped_early",
                       "runs",
                       "simulated",
                       "candidates"});
  check_informational_keys(reader);
  Plan plan;
  plan.batch_size = static_cast<int>(reader.integer("batch_size", 1, 1 << 20));
  plan.accumulation_steps =
      static_cast<int>(reader.optional_integer("accumulation_steps", 1, 1 << 16).value_or(0));
  if (reader.has("ranks") && reader.integer("ranks", 1, 1 << 20) != cost_model.ranks()) {
    reader.fail("ranks", fmt::format("the cluster's world size ({} ranks): this plan was made for "
                                     "another cluster",
                                     cost_model.ranks()));
  }
  plan.choices.assign(workload.size(), OperatorChoice{});
  std::vector<bool> seen(workload.size(), false);
  const auto entries = reader.objects("operators");
  for (const auto& entry : entries) {
    entry.require_only({"name", "mode", "slices", "sharded_slices", "checkpoint", "offload",
                        "time_s", "memory_bytes"});
    const std::string name = entry.string("name");
    const auto index = workload.find(name);
    if (!index)
      entry.fail("name", "the name of an operator of the model \"" + workload.name() + "\"");
    if (seen[*index]) entry.fail("name", "each operator once");
    seen[*index] = true;
    OperatorChoice choice;
    const std::string mode = entry.string("mode");
    if (const auto parsed = mode_from_name(mode)) {
      choice.mode = *parsed;
    } else {
      entry.fail_value("mode", "\"" + mode + "\"", "one of " + mode_names());
    }
    choice.slices = static_cast<int>(entry.optional_integer("slices", 1, 64).value_or(1));
    const int default_sharded = choice.mode == Mode::dp ? 0 : choice.slices;
    choice.sharded_slices = static_cast<int>(
        entry.optional_integer("sharded_slices", 0, choice.slices).value_or(default_sharded));
    if (entry.has("checkpoint")) {
      choice.checkpoint =
          *checkpoint_from_name(entry.choice("checkpoint", {"none", "unfused", "fused"}));
    }
    choice.offload = entry.optional_boolean("offload").value_or(false);
    if (choice.offload && !describe_mode(choice.mode).offload) {
      entry.fail_value("offload", "true", "false for mode " + mode + " (it has no CPU offload)");
    }
    if (!choice_consistent(choice)) {
      entry.fail("sharded_slices", "0 for mode dp, and at least 1 for a sharded mode");
    }
    if (!cost_model.valid(*index, choice)) {
      const int split_units = workload.op(*index).split_units;
      entry.fail_value("", fmt::format("{} for {}", describe(choice), name),
                       split_units > 0 && split_units % choice.slices != 0
                           ? fmt::format("a slice count that divides the operator's {} split "
                                         "units (its attention heads, MLP hidden units or input "
                                         "width, as the runtime splits it)",
                                         split_units)
                           : "a choice the operator and cluster allow (slices need a splittable "
                             "operator, checkpointing an input_activation_bytes_per_sample, hsdp "
                             "several nodes)");
    }
    plan.choices[*index] = choice;
  }
  for (int i = 0; i < workload.size(); ++i) {
    if (!seen[i]) {
      reader.fail("operators",
                  "an entry for every operator; missing \"" + workload.op(i).name + "\"");
    }
  }
  return plan;
}

}  // namespace

Plan load_plan_file(const std::string& path, const Workload& workload,
                    const CostModel& cost_model) {
  const Json document = read_json_file(path);
  const JsonReader reader(document, path);
  // The usual slip, `--plan scenario.json`: said as such, not as an unknown key of a plan.
  if (document.is_object() && !document.contains("operators") &&
      (document.contains("model") || document.contains("cluster"))) {
    reader.fail_value("", "a scenario file",
                      "a plan (as `osdp plan --json` writes it); a scenario goes first, before "
                      "--plan");
  }
  return load_plan(reader, workload, cost_model);
}

Json plan_to_json(const Plan& plan, const Workload& scenario_workload) {
  std::optional<Workload> wrapped;
  if (wraps(plan, scenario_workload)) {
    wrapped.emplace(wrap_workload(scenario_workload, plan.unit_sizes));
  }
  const Workload& workload = wrapped ? *wrapped : scenario_workload;
  Json operators = Json::array();
  for (int i = 0; i < workload.size(); ++i) {
    const OperatorChoice& choice = plan.choices[i];
    Json entry = {{"name", workload.op(i).name}, {"mode", std::string(mode_name(choice.mode))}};
    if (choice.slices > 1) {
      entry["slices"] = choice.slices;
      entry["sharded_slices"] = choice.sharded_slices;
    }
    if (choice.checkpoint != Checkpoint::none) {
      entry["checkpoint"] = std::string(checkpoint_name(choice.checkpoint));
    }
    if (choice.offload) entry["offload"] = true;
    operators.push_back(std::move(entry));
  }
  Json json = {{"batch_size", plan.batch_size}, {"operators", std::move(operators)}};
  if (plan.accumulation_steps > 0) json["accumulation_steps"] = plan.accumulation_steps;
  if (!plan.unit_sizes.empty()) json["units"] = plan.unit_sizes;
  return json;
}

}  // namespace osdp
