// `osdp calibrate`: OSDP's profiler on this machine (CPU ranks over Gloo): collective alpha/beta
// over message sizes, operator compute rates, memory bandwidth, launch cost, overlap slowdown.
//   osdp calibrate --ranks N [--model SCENARIO] [--out cluster.json] [--report report.json]
//   [--json] [--device cpu|cuda]
//   osdp calibrate --refit report.json --cluster cluster.json [--out cluster.json] [--json]
//     measures nothing: the cluster's compute laws fitted again on a kept report's timings.
// Writes a cluster description that `plan`, `simulate` and `validate --cluster` load. Runs in
// osdp-runtime (it loads libtorch); `osdp calibrate` hands its arguments over.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "cli/command.hpp"
#include "model/atomic_file.hpp"
#include "model/cluster_json.hpp"
#include "model/json_reader.hpp"
#include "model/scenario.hpp"
#include "model/units.hpp"
#include "validate/calibration.hpp"
#include "validate/calibration_report.hpp"
#include "validate/device_kind.hpp"
#include "validate/gpt_shape.hpp"
#include "validate/rank_runner.hpp"

namespace osdp::cli {
namespace {

struct CalibrateOptions {
  int ranks = 2;
  std::string out;
  std::string report;
  std::string name;
  std::string model;  // a scenario whose GPT is the probe
  bool json = false;
  bool quick = false;
  std::string device = "cpu";
  std::string refit;    // a kept report: fit its operator timings again, measure nothing
  std::string cluster;  // with --refit: the cluster that report calibrated
};

// Each (flag, path) given whose path cannot be written is bad input, found before any work.
void refuse_unwritable(std::initializer_list<std::pair<const char*, std::string>> outputs) {
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    if (const auto why = unusable_output(path)) {
      throw InputError("command line", flag, path,
                       "a file path osdp can write to (this is " + *why + ")");
    }
  }
}

// A kept report's operator timings and slicing points, with its file named in errors.
validate::CalibrationResult read_report(const std::string& path) {
  const Json document = read_json_file(path);
  try {
    return validate::calibration_result_from_report(document);
  } catch (const Json::exception& error) {
    throw InputError(
        path, "$", "(the report)",
        std::string("a report `osdp calibrate --report` wrote (") + error.what() + ")");
  }
}

int refit(const CalibrateOptions& options) {
  if (options.cluster.empty()) {
    throw InputError("command line", "--refit", options.refit,
                     "--cluster too: the cluster JSON that calibration wrote (--refit replaces "
                     "its compute laws)");
  }
  refuse_unwritable({{"--out", options.out}});
  const validate::CalibrationResult measured = read_report(options.refit);
  if (measured.operators.empty()) {
    throw InputError(options.refit, "$.operators", "[]",
                     "the operator timings of a calibration (a report of `osdp calibrate` on "
                     "CPU ranks or one GPU)");
  }
  for (std::size_t i = 0; i < measured.operators.size(); ++i) {
    const validate::OperatorPoint& point = measured.operators[i];
    const auto refuse = [&](const char* key, double value, const char* expected) {
      throw InputError(options.refit, fmt::format("$.operators[{}].{}", i, key),
                       fmt::format("{}", value), expected);
    };
    for (const auto& [key, seconds] :
         {std::pair{"forward_s", point.forward_s}, std::pair{"backward_s", point.backward_s}}) {
      if (!(seconds > 0 && std::isfinite(seconds))) refuse(key, seconds, "a time above zero");
    }
    if (point.batch_size < 1) refuse("batch_size", point.batch_size, "a batch size from 1");
    if (point.calls < 1) refuse("calls", point.calls, "a count of calls from 1");
    for (const auto& [key, amount] :
         {std::pair{"forward_flops_per_sample", point.forward_flops_per_sample},
          std::pair{"backward_flops_per_sample", point.backward_flops_per_sample},
          std::pair{"activation_bytes_per_sample", point.activation_bytes_per_sample}}) {
      if (!(amount >= 0 && std::isfinite(amount))) refuse(key, amount, "a number from 0");
    }
  }
  const Cluster kept = load_cluster(JsonReader(read_json_file(options.cluster), options.cluster));
  Cluster refitted;
  try {
    refitted = validate::refit_operator_compute(kept, measured);
  } catch (const std::exception& error) {  // timings no law fits (a report edited by hand)
    throw InputError(options.refit, "$.operators", "(the operator timings)",
                     std::string("timings a compute law can be fitted on (") + error.what() + ")");
  }
  const Json cluster = cluster_to_json(refitted);
  // Laws a cluster cannot hold (an unknown operator kind, a rate that is not a number) are the
  // report's error, found before anything is written.
  (void)load_cluster(JsonReader(cluster, options.refit, "$ (its laws in a cluster)"));
  if (!options.out.empty()) write_files_atomically({{options.out, cluster.dump(2) + "\n"}});
  if (options.json) {
    fmt::print("{}\n", cluster.dump(2));
    return exit_ok;
  }
  fmt::print("compute laws of {} fitted again on the {} operator timings of {}\n", options.cluster,
             measured.operators.size(), options.refit);
  fmt::print("  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12}\n", "operator", "pass", "fixed was",
             "fixed now", "GFLOP/s was", "GFLOP/s now");
  const auto gflops = [](const ComputeLaw& law) {
    return law.flops_per_s ? fmt::format("{:.1f}", *law.flops_per_s / 1e9) : std::string("-");
  };
  const auto row = [&](const std::string& kind, const char* pass, const ComputeLaw& was,
                       const ComputeLaw& now) {
    fmt::print("  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12}\n", kind, pass,
               units::format_seconds(was.fixed_s), units::format_seconds(now.fixed_s), gflops(was),
               gflops(now));
  };
  for (const auto& [kind, law] : refitted.gpu.operator_compute) {
    const auto found = kept.gpu.operator_compute.find(kind);
    const OperatorCompute was =
        found == kept.gpu.operator_compute.end() ? OperatorCompute{} : found->second;
    row(kind, "forward", was.forward, law.forward);
    row(kind, "backward", was.backward, law.backward);
  }
  if (!options.out.empty()) fmt::print("  cluster written to {}\n", options.out);
  return exit_ok;
}

int run(const CalibrateOptions& options) {
  if (!options.refit.empty()) return refit(options);
  // Outputs that cannot be written are bad input found before a minute of measuring.
  refuse_unwritable({{"--out", options.out}, {"--report", options.report}});
  validate::CalibrationOptions calibration;
  if (options.device == "cuda") {
    // One GPU: its compute. A collective needs two ranks; between GPUs the NCCL probe times them.
    if (options.ranks != 1) {
      throw InputError("command line", "--ranks", std::to_string(options.ranks),
                       "1 with --device cuda (calibrate times one GPU's compute; the collectives "
                       "between GPUs are validate/cuda/osdp_nccl_probe's)");
    }
    if (!validate::cuda_device_path_built()) {
      throw InputError(
          "command line", "--device", "cuda",
          "cpu (this osdp was built without the CUDA + NCCL device path: configure "
          "with -DOSDP_WITH_CUDA=ON and CMAKE_PREFIX_PATH pointing at a CUDA libtorch)");
    }
    calibration.device = validate::DeviceKind::cuda;
    calibration.cluster_name = "local-gpu (calibrated)";
  }
  if (!options.name.empty()) calibration.cluster_name = options.name;
  if (options.quick) {
    calibration.message_bytes = {16e3, 256e3, 4e6};
    calibration.repetitions = 3;
    calibration.collective_rounds = 3;
    calibration.compute_rounds = 1;
    calibration.blocking_sync_steps = 9;
    calibration.probe = {2, 64, 4, 32, 256};
    calibration.extra_compute_probes.clear();
    calibration.batch_sizes = {1, 2};
  }
  if (!options.model.empty()) {
    // Calibrating on the model to be validated: the compute laws and the in-training figures
    // are the most faithful for the operators and the step they were measured on.
    const Scenario scenario = load_scenario(options.model);
    calibration.probe = validate::require_gpt_shape(scenario, options.model);
    calibration.extra_compute_probes.clear();
    // Every rank holds a replicated fp32 copy with Adam (16 bytes a parameter) in the probe.
    const double probe_bytes = 16.0 * scenario.workload->parameter_count() * options.ranks;
    const double memory_bytes =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (probe_bytes > 0.5 * memory_bytes) {
      throw InputError(options.model, "$.model", units::format_bytes(probe_bytes),
                       fmt::format("a GPT whose replicated states on {} ranks fit in half of "
                                   "this machine's {} (the probe trains it data-parallel)",
                                   options.ranks, units::format_bytes(memory_bytes)));
    }
  }
  const bool on_gpu = calibration.device == validate::DeviceKind::cuda;
  if (!options.json && on_gpu) {
    fmt::print(stderr,
               "osdp calibrate: one GPU (cuda:0): compute laws of the probe ({} layers, hidden {}, "
               "sequence {}); collectives skipped (they need two ranks)\n",
               calibration.probe.layers, calibration.probe.hidden,
               calibration.probe.sequence_length);
  } else if (!options.json) {
    fmt::print(stderr, "osdp calibrate: {} local ranks, {} message sizes x 3 collectives\n",
               options.ranks, calibration.message_bytes.size());
  }
  // A failed or interrupted run throws RunFailure: osdp-runtime's main reports it.
  const std::optional<validate::CalibrationResult> result =
      validate::run_calibration(options.ranks, calibration);
  if (!result) return exit_ok;  // not rank 0 under torchrun
  const Json cluster = cluster_to_json(result->cluster);
  const Json report = validate::calibration_report_json(*result);
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!options.out.empty()) outputs.emplace_back(options.out, cluster.dump(2) + "\n");
  if (!options.report.empty()) outputs.emplace_back(options.report, report.dump(2) + "\n");
  write_files_atomically(outputs);
  if (options.json) {
    fmt::print("{}\n", Json{{"cluster", cluster}, {"report", report}}.dump(2));
    return exit_ok;
  }
  if (on_gpu) {
    fmt::print("calibrated one GPU on this machine: {}, {}\n", result->cluster.gpu.name,
               units::format_bytes(result->cluster.gpu.memory_bytes.value_or(0)));
    fmt::print(
        "  collectives: not measured (one rank runs none: a collective needs two ranks; between "
        "GPUs validate/cuda/osdp_nccl_probe times them)\n");
  } else {
    fmt::print("calibrated {} ranks on this machine\n", result->ranks);
    fmt::print(
        "  collectives as a training step issues them (after compute, waited for; mean and "
        "middle half), and back-to-back;\n  last to come: the time of the rank that came last, "
        "arrival spread: how much longer the first one waited (each call, then the mean)\n");
  }
  if (!result->collectives.empty()) {
    fmt::print("  {:<16}{:>12}{:>12}{:>22}{:>14}{:>16}{:>14}{:>10}{:>14}{:>16}\n", "collective",
               "bytes", "time", "middle half", "step time", "bus bandwidth", "back-to-back",
               "CPU busy", "last to come", "arrival spread");
  }
  auto print_collective = [](const validate::CollectivePoint& point) {
    fmt::print(
        "  {:<16}{:>12}{:>12}{:>22}{:>14}{:>16}{:>14}{:>9.0f}%{:>14}{:>16}\n",
        collective_name(point.kind), units::format_bytes(point.bytes),
        units::format_seconds(point.time_s),
        units::format_seconds(point.time_q1_s) + " - " + units::format_seconds(point.time_q3_s),
        units::format_seconds(point.step_time_s), units::format_bandwidth(point.bus_bandwidth_Bps),
        units::format_seconds(point.back_to_back_time_s), 100 * point.cpu_fraction,
        units::format_seconds(point.last_arrival_time_s),
        units::format_seconds(point.arrival_spread_s));
  };
  for (const auto& point : result->collectives) print_collective(point);
  if (!result->pair_collectives.empty()) {
    fmt::print(
        "  the same over pairs of neighbouring ranks, every pair at once (a tensor-parallel "
        "pair's collectives; the cluster's collective_by_group_size \"2\")\n");
    for (const auto& point : result->pair_collectives) print_collective(point);
  }
  // Each point against its kind's fitted law (forward + backward), fitted over every probe.
  auto law_s = [&](const validate::OperatorPoint& point) {
    const auto found = result->cluster.gpu.operator_compute.find(point.kind);
    return found == result->cluster.gpu.operator_compute.end()
               ? 0.0
               : validate::operator_law_s(found->second, point);
  };
  fmt::print("  {:<24}{:<12}{:>7}{:>12}{:>12}{:>10}{:>12}{:>24}\n", "probe", "operator", "batch",
             "forward", "backward", "GFLOP/s", "law off", "spread of the rounds");
  for (const auto& point : result->operators) {
    const double measured_s = point.forward_s + point.backward_s;
    fmt::print("  {:<24}{:<12}{:>7}{:>12}{:>12}{:>10.2f}{:>11.1f}%{:>24}\n", point.probe,
               point.kind, point.batch_size, units::format_seconds(point.forward_s),
               units::format_seconds(point.backward_s), point.flops / measured_s / 1e9,
               100 * (law_s(point) - measured_s) / measured_s,
               fmt::format("{:.1f} % ({} round{})", 100 * point.round_spread, point.rounds,
                           point.rounds == 1 ? "" : "s"));
  }
  fmt::print("  {:<12}{:>12}{:>13}{:>13}{:>12}{:>12}{:>13}{:>13}{:>12}\n", "compute law",
             "fwd fixed", "fwd GFLOP/s", "fwd act B/s", "fwd +slice", "bwd fixed", "bwd GFLOP/s",
             "bwd act B/s", "bwd +slice");
  auto rate = [](const ComputeLaw& law) {
    return law.flops_per_s ? fmt::format("{:.2f}", *law.flops_per_s / 1e9) : std::string("-");
  };
  // The memory-bound term's rate (activation bytes saved for backward per second).
  auto traffic = [](const ComputeLaw& law) {
    return law.activation_bytes_per_s ? units::format_bandwidth(*law.activation_bytes_per_s)
                                      : std::string("-");
  };
  auto extra = [](const ComputeLaw& law) {
    return law.extra_slice_s ? units::format_seconds(*law.extra_slice_s) : std::string("-");
  };
  for (const auto& [kind, law] : result->cluster.gpu.operator_compute) {
    fmt::print("  {:<12}{:>12}{:>13}{:>13}{:>12}{:>12}{:>13}{:>13}{:>12}\n", kind,
               units::format_seconds(law.forward.fixed_s), rate(law.forward), traffic(law.forward),
               extra(law.forward), units::format_seconds(law.backward.fixed_s), rate(law.backward),
               traffic(law.backward), extra(law.backward));
  }
  fmt::print("  compute rate      {:.2f} GFLOP/s (sustained, largest batch)\n",
             result->compute_flops_per_s / 1e9);
  fmt::print("  memory bandwidth  {}\n", units::format_bandwidth(result->memory_bandwidth_Bps));
  fmt::print("  optimizer update  {} of states read and written\n",
             units::format_bandwidth(result->optimizer_bandwidth_Bps));
  fmt::print("  kernel launch     {}\n", units::format_seconds(result->kernel_launch_s));
  {
    const auto& runs = result->compute_straggling_runs;
    const auto [low, high] =
        runs.empty() ? std::pair<double, double>{1.0, 1.0}
                     : std::pair<double, double>{*std::min_element(runs.begin(), runs.end()),
                                                 *std::max_element(runs.begin(), runs.end())};
    fmt::print(
        "  straggling        {:.3f}x [{:.3f}-{:.3f}x over {} runs] (the slowest rank's compute "
        "over the mean, every rank\n                    computing at once with no collective: "
        "a step meets at each collective)\n",
        result->compute_straggler_slowdown, low, high, runs.size());
    if (result->cluster.gpu.straggler_slowdown != result->compute_straggler_slowdown) {
      fmt::print(
          "                    not applied: more ranks than cores, a rank that waits gives "
          "its core to the\n                    others (the laws hold the sharing)\n");
    }
  }
  if (result->cluster.host_cores) {
    fmt::print(
        "  shared cores      {} (every rank's compute and communication thread run on "
        "them;\n                    overlapping both slows each {:.2f}x)\n",
        result->cluster.host_cores->cores, shared_core_overlap_slowdown(result->cluster));
    if (const double straggling = result->cluster.host_cores->step_straggling; straggling > 1) {
      fmt::print(
          "  step straggling   {:.3f}x (the slowest rank's compute of a whole step over the "
          "mean; applied\n                    where data-parallel replicas meet only at the "
          "step's end)\n",
          straggling);
    }
    if (const double tick_s = result->cluster.host_cores->scheduler_tick_s; tick_s > 0) {
      fmt::print(
          "  scheduler tick    {:.1f} ms (a collective issued while every core computes starts "
          "at the next one)\n",
          1e3 * tick_s);
    }
  }
  if (const validate::BlockingSyncFigures& sync = result->blocking_sync; sync.tensor_degree > 0) {
    const auto [low, high] = std::minmax_element(sync.step_wait_s.begin(), sync.step_wait_s.end());
    fmt::print(
        "  blocking sync     {} a tensor-parallel sum (applied): a tp {}{} step of the probe at "
        "batch {} waited {}\n                    [{}-{} over {} steps] for its sums against "
        "{} for {:.0f} sums in the model\n",
        units::format_seconds(sync.per_sync_s), sync.tensor_degree,
        result->ranks > sync.tensor_degree
            ? fmt::format(" x dp {}", result->ranks / sync.tensor_degree)
            : std::string(),
        sync.batch_size, units::format_seconds(sync.measured_wait_s), units::format_seconds(*low),
        units::format_seconds(*high), sync.steps, units::format_seconds(sync.model_wait_s),
        sync.model_syncs);
  }
  if (result->in_training_runs.empty()) {  // one GPU: no collective to run beside compute
    if (!options.out.empty()) fmt::print("  cluster written to {}\n", options.out);
    return exit_ok;
  }
  fmt::print(
      "  in a training step (operators in turn ZDP, DP, ZDP in slices), the median of {} "
      "probe runs (their range in brackets);\n  for comparison only, not applied: the shared "
      "cores make these slowdowns in the simulation\n",
      result->in_training_runs.size());
  // "[1.44-1.85x]": the lowest and highest of the probe runs.
  auto range = [&](double validate::CalibrationResult::InTrainingRun::*figure) {
    double low = 0, high = 0;
    for (std::size_t r = 0; r < result->in_training_runs.size(); ++r) {
      const double value = result->in_training_runs[r].*figure;
      low = r == 0 ? value : std::min(low, value);
      high = r == 0 ? value : std::max(high, value);
    }
    return fmt::format("[{:.2f}-{:.2f}x]", low, high);
  };
  using Run = validate::CalibrationResult::InTrainingRun;
  const validate::ContentionBySize& contention = result->collective_contention;
  std::string by_size;
  for (std::size_t s = 0; s < contention.factors.size(); ++s) {
    by_size += fmt::format("{}{:.2f}x from {} steps", s == 0 ? "" : ", ", contention.factors[s],
                           units::format_bytes(contention.min_step_bytes[s]));
  }
  fmt::print("    collectives      {:.2f}x {} the times above overall ({})\n", contention.overall,
             range(&Run::collective_contention), by_size);
  fmt::print("    overlap slowdown {:.2f}x {} (compute while a collective runs)\n",
             result->overlap_slowdown, range(&Run::overlap_slowdown));
  fmt::print("    straggling       {:.2f}x {} (the slowest rank's compute over the mean)\n",
             result->straggler_slowdown, range(&Run::straggler_slowdown));
  if (!options.out.empty()) fmt::print("  cluster written to {}\n", options.out);
  return exit_ok;
}

}  // namespace

Subcommand add_calibrate_command(CLI::App& root) {
  auto options = std::make_shared<CalibrateOptions>();
  CLI::App* app = root.add_subcommand(
      "calibrate", "Measure collectives and compute on local CPU ranks; write a cluster JSON");
  app->add_option("--ranks", options->ranks, "Local ranks to start (default 2)")
      ->check(CLI::Range(1, 1024));
  app->add_option("--out", options->out,
                  "Write the cluster description here (default: print the table only)");
  app->add_option("--report", options->report,
                  "Write every measured point here (JSON; default: none)");
  app->add_option("--name", options->name,
                  "Name of the calibrated cluster (default \"local-cpu (calibrated)\")");
  app->add_option("--model", options->model,
                  "Scenario whose GPT the compute probe runs, alone (default: three GPT shapes "
                  "none of the shipped CPU scenarios has, 2 x 160, 2 x 320 and 2 x 448 wide, "
                  "sequences 64-192)");
  app->add_flag("--quick", options->quick, "Fewer sizes and a smaller probe model (seconds)");
  app->add_option("--device", options->device,
                  "cpu (default: CPU ranks over Gloo) or cuda (one GPU, --ranks 1: its compute "
                  "laws; needs a build with -DOSDP_WITH_CUDA=ON)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_flag("--json", options->json, "Print the cluster and the measurements as JSON");
  CLI::Option* refit =
      app->add_option("--refit", options->refit,
                      "Measure nothing: fit the compute laws of --cluster again on the operator "
                      "timings of this kept --report (the rest of the cluster as it is), e.g. to "
                      "score a change to the fit on calibrations kept in plots/measurements/");
  app->add_option("--cluster", options->cluster,
                  "With --refit: the cluster JSON the report's calibration wrote")
      ->needs(refit);
  for (const char* measuring :
       {"--ranks", "--report", "--name", "--model", "--quick", "--device"}) {
    refit->excludes(app->get_option(measuring));
  }
  return {app, [options]() { return run(*options); }};
}

}  // namespace osdp::cli
