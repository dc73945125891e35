// The options every planning subcommand shares: the scenario file and the command-line
// overrides of its training and "search" blocks. Flags win over the scenario.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/scenario.hpp"

namespace osdp::cli {

struct ScenarioOptions {
  std::string scenario_path;
  std::string memory_limit;     // "8GiB"; empty: the scenario's
  std::string modes;            // "dp,zdp"; empty: the scenario's
  std::string split;            // "1", "2", "4", "8", "auto"
  std::string checkpoint;       // "off", "on", "auto"
  std::string cost_model;       // "paper", "extended"
  std::string gap;              // optimality gap, "1e-4"; "0": exact
  std::string time_limit;       // search time limit, "10s"
  std::string units;            // FSDP units: "off", "block", "auto"
  std::string offload;          // CPU offload: "off", "on", "auto"
  std::string min_unit_params;  // size-based wrapping's minimum, "1e8"
  // The run's training, as a user states one (each overrides the scenario's training):
  std::string micro_batch;   // "4": the micro-batch per rank (min = max batch size)
  std::string accumulation;  // "8": micro-batches per rank per iteration
  std::string global_batch;  // "512": samples per iteration (the scheduler picks b and m)
  std::string precision;     // fp32, mixed, amp_bf16, bf16
  std::string seq_len;       // a generated GPT's sequence length
  bool force = false;        // run even when the work estimate is absurd
  // Set by a command that plans 3D layouts: the global batch then divides over the layout's
  // data-parallel degree (some divisor of the GPUs), not over every rank.
  bool layouts = false;
};

// Registers SCENARIO and the override flags on `app`. `with_memory_limit` is false for
// commands that take their own limits (sweep); `scenario_required` is false for commands that
// also run without a scenario (simulate --collective).
void add_scenario_options(CLI::App& app, ScenarioOptions& options, bool with_memory_limit = true,
                          bool scenario_required = true);

// The override flags given and their values ({"--modes", "dp,zdp"}), in --help's order;
// `search_only`: only the data-parallel search's own (modes, split, checkpointing, units,
// offload, cost model, gap, time limit), which a 3D layout search refuses.
std::vector<std::pair<std::string, std::string>> overrides_given(const ScenarioOptions& options,
                                                                 bool search_only = false);
// The first of them, or nothing: for commands that refuse them in a mode that reads no scenario.
std::optional<std::pair<std::string, std::string>> first_override_given(
    const ScenarioOptions& options);

// Loads a scenario with the checks every command shares, its "validation" block included: what
// `validate` would refuse, `plan` and `simulate` refuse too.
Scenario load_checked_scenario(const std::string& path);

// Loads the scenario and applies the overrides. Bad flag values are InputErrors naming the flag.
// Held by pointer: the cost model keeps references into the scenario.
std::unique_ptr<const Scenario> load_with_overrides(const ScenarioOptions& options);

// The files `scenario` was read from (the scenario's, its model's and its cluster's) and
// `more` (a plan file, a table): what no output of the command may overwrite.
std::vector<std::string> files_read(const Scenario& scenario, std::vector<std::string> more = {});
// Throws InputError naming `flag` when `output` is one of `inputs` (by whatever path).
void refuse_output_over_input(const std::string& flag, const std::string& output,
                              const std::vector<std::string>& inputs);

// "modes dp,zdp,z2  split 1,4  checkpoint auto  cost model extended"
std::string describe_search(const Scenario& scenario);

// A list flag with an empty item ("dp,,zdp", "8MiB,,16MiB", a trailing comma) is a typo, not a
// shorter list: InputError naming `flag` and the whole value.
void refuse_empty_items(const std::string& flag, const std::string& text, char separator = ',');

// Parses a byte quantity given on the command line ("8GiB"); InputError naming `flag` if bad.
double parse_bytes_flag(const std::string& flag, const std::string& text);

// --memory-limits: "4GiB:24GiB:1GiB" (start:stop:step, stop included) or "8GiB,16GiB", at most
// `max_points` of them; InputError naming the flag if bad (each limit's own range and the GPU's
// memory: check_memory_limit_flag, once the scenario is loaded).
std::vector<double> parse_memory_limits(const std::string& text, int max_points);

// A memory limit from the command line within its plausible range and at most the GPU's memory;
// InputError naming `flag` if not.
void check_memory_limit_flag(const std::string& flag, const std::string& text, double limit_bytes,
                             const Scenario& scenario);

// The limits `sweep` and `report` run at: `text` (--memory-limits) parsed and each checked
// against the scenario; without it, 16 steps up to the GPU's memory (1/16 of it, 2/16, ...;
// twice the training's memory limit where the cluster declares no GPU memory).
std::vector<double> sweep_memory_limits(const std::string& text, int max_points,
                                        const Scenario& scenario);

}  // namespace osdp::cli
