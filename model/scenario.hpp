// Loading a scenario: the model, cluster and training it names or embeds (each read by its own
// reader: model/*_json.hpp), its search, simulation and validation options, and the checks that
// need them together. Everything is converted to SI units once, when read; unknown keys and bad
// values are InputErrors naming the file and JSON path.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/cluster.hpp"
#include "model/cluster_json.hpp"  // the readers of a scenario's parts, one file each
#include "model/cost_model.hpp"
#include "model/json_reader.hpp"
#include "model/plan.hpp"
#include "model/plan_json.hpp"
#include "model/training.hpp"
#include "model/training_json.hpp"
#include "model/workload.hpp"
#include "model/workload_json.hpp"

namespace osdp {

// What the search may choose from, as a scenario or the command line states it.
struct SearchSpec {
  std::vector<Mode> modes{Mode::dp, Mode::zdp};
  std::vector<int> granularities{1};  // split granularities allowed besides 1
  enum class CheckpointPolicy { off, on, automatic } checkpoint = CheckpointPolicy::off;
  // The search stops once no plan can be faster than the best found by more than this
  // fraction of its time (0: exact up to rounding; 1e-4 is also Gurobi's default MIP gap).
  // Modelled times carry far more error than 0.01%, and proving the last digits is what makes
  // instances with many distinct, nearly interchangeable operators hard (a subset-sum).
  double optimality_gap = 1e-4;
  // Wall-clock budget of one search (all batch sizes); when it runs out the best plan found so
  // far is returned with its proven distance from the optimum.
  double time_limit_s = 10;
  // FSDP units (model/wrapping.hpp): off, one unit per operator; block, one unit per
  // transformer block; automatic, the best of several wrappings (search/units_search.hpp).
  enum class UnitsPolicy { off, block, automatic } units = UnitsPolicy::off;
  // CPU offload of the sharded modes' states (model/mode.hpp): off, never; on, every operator
  // that runs a mode with an offload; automatic, chosen per operator.
  enum class OffloadPolicy { off, on, automatic } offload = OffloadPolicy::off;
  // The size-based wrapping's minimum (PyTorch's min_num_params): fsdp_min_params and --units
  // auto use it.
  double min_unit_parameters = 1e8;
};
std::optional<std::vector<Mode>> parse_modes(const std::string& text);  // "dp,zdp,z2"
std::optional<std::vector<int>> parse_split(const std::string& text);   // "4", "auto"
std::optional<SearchSpec::CheckpointPolicy> parse_checkpoint_policy(const std::string& text);
std::optional<SearchSpec::UnitsPolicy> parse_units_policy(
    const std::string& text);  // "off", "block", "auto"
std::string_view units_policy_name(SearchSpec::UnitsPolicy policy);
std::optional<SearchSpec::OffloadPolicy> parse_offload_policy(
    const std::string& text);  // "off", "on", "auto"
std::string_view offload_policy_name(SearchSpec::OffloadPolicy policy);

struct Scenario {
  std::string file;  // where it was read from ("" when built in code)
  std::string name;
  std::string description;
  std::shared_ptr<const Workload> workload;
  std::optional<GptSpec> gpt;  // when the model is generated: what made it
  Cluster cluster;
  Json cluster_document;      // the cluster as written (a fit writes it back with new constants)
  JsonSource cluster_source;  // where the cluster was written, for messages
  JsonSource model_source;    // likewise the model
  Training training;
  CostSettings cost;
  SearchSpec search;
  Json simulation = Json::object();  // options of the simulator, read by sim/
  Json validation = Json::object();  // options of the validator, read by validate/
  // How the runs of a measured table ran (mode, checkpointed kinds), read by measured_runs.cpp.
  Json measured_runs = Json::object();

  // The cost model, told the finest split the search may choose (see CostSettings). It refers
  // to this scenario's members: keep the scenario alive while it is used.
  CostModel cost_model() const;
  // The cost model a given plan is costed on: its neighbours split as finely as the plan splits
  // any operator (finest_split(plan)), whatever the search's options.
  CostModel cost_model_for(const Plan& plan) const;
  // This scenario with the training `plan` runs: its accumulation steps (recorded in the plan,
  // or reaching the global batch at its micro-batch), the global batch no longer to be chosen.
  Scenario for_plan(const Plan& plan) const;
};

Scenario load_scenario(const std::string& path);
Scenario scenario_from_json(const Json& document, const std::string& file);

}  // namespace osdp
