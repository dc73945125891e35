#include "validate/rank_runner.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>

#include "model/atomic_file.hpp"
#include "model/chrome_trace.hpp"
#include "model/input_error.hpp"
#include "validate/calibration.hpp"
#include "validate/compute_threads.hpp"
#include "validate/launch.hpp"
#include "validate/parallel_gpt.hpp"
#include "validate/peer_waits.hpp"
#include "validate/runtime_process.hpp"
#include "validate/sharded_gpt.hpp"

namespace osdp::validate {
namespace {

namespace fs = std::filesystem;

constexpr int figures_per_rank = 6;

// The step's collectives (those that ended after it began, at `step_start_s` on the steady
// clock) on the communication track, and its peak memory as a counter.
void add_communication_and_peak(Json& events, const std::vector<CollectiveEvent>& collectives,
                                double step_start_s, std::int64_t peak_memory_bytes, int rank,
                                double offset_s) {
  for (const auto& c : collectives) {
    if (c.end_s < step_start_s) continue;
    events.push_back(chrome_complete_event(std::string(collective_name(c.kind)), "communication",
                                           rank, 1, offset_s + c.start_s - step_start_s,
                                           std::max(c.end_s - c.start_s, 0.0),
                                           {{"bytes", c.bytes}, {"ranks", c.ranks}}));
  }
  events.push_back({{"name", "peak memory"},
                    {"ph", "C"},
                    {"ts", 1e6 * offset_s},
                    {"pid", rank},
                    {"args", {{"peak_memory_bytes", peak_memory_bytes}}}});
}

// Chrome trace events of one iteration, in microseconds from the earliest rank's step start:
// this rank's step began `offset_s` after it, so waits between ranks show.
Json trace_events(const GptShape& shape, const Plan& plan, const StepMetrics& metrics,
                  const std::vector<CollectiveEvent>& collectives, int rank, double offset_s) {
  Json events = Json::array();
  auto complete = [&](const std::string& name, const char* category, int track, double start_s,
                      double duration_s, Json args) {
    events.push_back(chrome_complete_event(name, category, rank, track, offset_s + start_s,
                                           std::max(duration_s, 0.0), std::move(args)));
  };
  // One entry per unit (an operator in a plan without units) and micro-batch: micro-batch u's
  // unit i at u x n + i.
  const std::vector<OperatorRange> units = plan_units(shape, plan);  // what the timings are of
  const std::size_t n = units.size();
  const std::size_t micro_batches = metrics.operators.size() / n;
  for (std::size_t e = 0; e < metrics.operators.size(); ++e) {
    const auto& op = metrics.operators[e];
    std::string name = unit_name(shape, units[e % n]);
    if (micro_batches > 1) name += fmt::format(" (micro-batch {})", e / n);
    complete(name + " forward", "compute", 0, op.forward_start_s, op.forward_s,
             {{"compute_s", op.forward_s}, {"peak_bytes", op.forward_peak_bytes}});
    complete(name + " backward", "compute", 0, op.backward_start_s, op.backward_s,
             {{"compute_s", op.backward_s}, {"peak_bytes", op.backward_peak_bytes}});
  }
  // Where the compute thread blocked on a collective (the phases' compute above excludes it), on
  // a track of their own: a wait inside a phase would overlap the phase's compute-only bar.
  for (const CollectiveWait& wait : metrics.waits) {
    complete("wait", "wait", 2, wait.start_s, wait.duration_s,
             {{"waited_s", wait.duration_s}, {"for", wait.collective}});
  }
  // The update's compute (its waits for the last gradient reductions come first): at the end.
  complete("optimizer step", "compute", 0, metrics.iteration_time_s - metrics.optimizer_step_s,
           metrics.optimizer_step_s, {{"compute_s", metrics.optimizer_step_s}});
  // The live-memory counter: after each operator's forward and backward, in time order (a
  // phase ends where the micro-batch's next one starts).
  for (std::size_t e = 0; e < metrics.operators.size(); ++e) {
    const auto& op = metrics.operators[e];
    const std::size_t i = e % n;
    const double forward_end_s =
        i + 1 < n ? metrics.operators[e + 1].forward_start_s : op.forward_start_s + op.forward_s;
    const double backward_end_s =
        i > 0 ? metrics.operators[e - 1].backward_start_s : op.backward_start_s + op.backward_s;
    for (const auto& [at_s, bytes] : {std::pair{forward_end_s, op.forward_end_live_bytes},
                                      std::pair{backward_end_s, op.backward_end_live_bytes}}) {
      events.push_back({{"name", "live memory"},
                        {"ph", "C"},
                        {"ts", 1e6 * (offset_s + at_s)},
                        {"pid", rank},
                        {"args", {{"live_bytes", bytes}}}});
    }
  }
  add_communication_and_peak(events, collectives, metrics.start_s, metrics.peak_memory_bytes, rank,
                             offset_s);
  return events;
}

// `values` (each rank's slot filled, the others zero) with every rank's slot filled, on the CPU.
at::Tensor gathered_on_every_rank(Communicator& communicator, RankDevice& device,
                                  const at::Tensor& values) {
  at::Tensor gathered = values.to(device.device());
  communicator.run(CollectiveKind::all_gather, gathered);
  return gathered.cpu();
}

// The smallest of every rank's `value` (steady clock readings: one clock on one machine).
double earliest(Communicator& communicator, RankDevice& device, double value) {
  at::Tensor values = at::zeros({communicator.size()}, at::kDouble);
  values[communicator.rank()] = value;
  return gathered_on_every_rank(communicator, device, values).min().item<double>();
}

// A sharded plan's measured step as peer_wait_s needs it: the compute's waits and the starts
// of the step's collectives on this rank's communication thread (steady clock).
struct StepWaitRecord {
  std::vector<TimeInterval> waits;
  std::vector<double> collective_starts_s;  // in issue order, the same collectives on every rank
  bool world_only = true;                   // every collective over all ranks (not HSDP's groups)
};

StepWaitRecord step_wait_record(const StepMetrics& metrics,
                                const std::vector<CollectiveEvent>& collectives, int world) {
  StepWaitRecord record;
  for (const CollectiveWait& wait : metrics.waits) {
    const double start_s = metrics.start_s + wait.start_s;
    record.waits.push_back({start_s, start_s + wait.duration_s});
  }
  for (const CollectiveEvent& collective : collectives) {
    if (collective.ranks <= 1) continue;  // a copy to or from the host, no peer
    if (collective.end_s < metrics.start_s) continue;
    if (collective.ranks != world) record.world_only = false;
    record.collective_starts_s.push_back(collective.start_s);
  }
  return record;
}

// The number of collectives of each recorded step, when every rank ran the same number over
// all ranks in every step (so that the i-th start of a step is the same collective on every
// rank); none otherwise, alike on every rank.
std::optional<std::vector<int64_t>> agreed_collective_counts(
    Communicator& communicator, RankDevice& device, const std::vector<StepWaitRecord>& steps) {
  const int world = communicator.size();
  const int64_t n = static_cast<int64_t>(steps.size());
  // Each rank's count per step, then whether its steps were world-only.
  at::Tensor counts = at::zeros({world * (n + 1)}, at::kDouble);
  double* mine = counts.data_ptr<double>() + communicator.rank() * (n + 1);
  bool world_only = true;
  for (int64_t s = 0; s < n; ++s) {
    mine[s] = static_cast<double>(steps[s].collective_starts_s.size());
    world_only = world_only && !steps[s].collective_starts_s.empty() && steps[s].world_only;
  }
  mine[n] = world_only ? 1.0 : 0.0;
  const at::Tensor all_counts = gathered_on_every_rank(communicator, device, counts);
  const double* c = all_counts.data_ptr<double>();
  for (int r = 0; r < world; ++r) {
    if (c[r * (n + 1) + n] != 1.0) return std::nullopt;
    for (int64_t s = 0; s < n; ++s) {
      if (c[r * (n + 1) + s] != c[s]) return std::nullopt;
    }
  }
  return std::vector<int64_t>(c, c + n);
}

// This rank's peer waits (validate/peer_waits) in each recorded step, from every rank's
// collective starts (exchanged after the plan's steps, so the exchange does not pace them);
// empty, alike on every rank, where the starts cannot be matched: other collective counts or
// groups, or clocks more than a second apart (ranks on other machines).
std::vector<double> exchange_peer_waits(Communicator& communicator, RankDevice& device,
                                        const std::vector<StepWaitRecord>& steps) {
  const int world = communicator.size();
  const int64_t n = static_cast<int64_t>(steps.size());
  if (world == 1) return std::vector<double>(steps.size(), 0.0);
  const auto counts = agreed_collective_counts(communicator, device, steps);
  if (!counts) return {};
  const int64_t most = *std::max_element(counts->begin(), counts->end());
  at::Tensor starts = at::zeros({world * n * most}, at::kDouble);
  double* own = starts.data_ptr<double>() + communicator.rank() * n * most;
  for (int64_t s = 0; s < n; ++s) {
    std::copy(steps[s].collective_starts_s.begin(), steps[s].collective_starts_s.end(),
              own + s * most);
  }
  const at::Tensor all_starts = gathered_on_every_rank(communicator, device, starts);
  const double* a = all_starts.data_ptr<double>();
  std::vector<double> waits;
  for (int64_t s = 0; s < n; ++s) {
    const std::vector<double>& own_starts_s = steps[s].collective_starts_s;
    std::vector<double> latest_s = own_starts_s;
    for (std::size_t i = 0; i < own_starts_s.size(); ++i) {
      double earliest_s = own_starts_s[i];
      for (int r = 0; r < world; ++r) {
        const double start_s = a[(r * n + s) * most + static_cast<int64_t>(i)];
        latest_s[i] = std::max(latest_s[i], start_s);
        earliest_s = std::min(earliest_s, start_s);
      }
      if (latest_s[i] - earliest_s > 1.0) return {};
    }
    waits.push_back(peer_wait_s(steps[s].waits, own_starts_s, latest_s));
  }
  return waits;
}

struct StepFigures {
  int index = 0;  // within the plan's turn: warm-up steps first
  double iteration_time_s = 0;
  double exposed_communication_s = 0;
  double peak_memory_bytes = 0;
  double loss = 0;
  double pipeline_wait_s = 0;  // of the exposed communication: receives from other stages
};

// The layers whose attention and MLP are ZDP where every other operator has the first's mode;
// refuses any other mix (InputError naming the operator).
std::vector<int> zdp_layers_of(const std::vector<Mode>& modes) {
  const Mode base = modes.front();
  std::vector<int> layers;
  const int count = static_cast<int>(modes.size());
  for (int op = 0; op < count; ++op) {
    const Mode mode = modes[op];
    const bool layer_operator = op > 0 && op + 1 < count;
    if (mode == base) continue;
    const int layer = (op - 1) / 2;
    const bool attention = (op - 1) % 2 == 0;
    if (mode != Mode::zdp || !layer_operator || base == Mode::zdp) {
      throw InputError("plan", fmt::format("$.layout.modes[{}]", op), std::string(mode_name(mode)),
                       fmt::format("{} as the other operators, or zdp for a layer's attention and "
                                   "MLP",
                                   mode_name(base)));
    }
    if (attention) {
      if (op + 1 >= count - 1 || modes[op + 1] != Mode::zdp) {
        throw InputError("plan", fmt::format("$.layout.modes[{}]", op + 1),
                         std::string(mode_name(modes[op + 1])),
                         fmt::format("zdp, as layer {}'s attention", layer));
      }
      layers.push_back(layer);
    }
  }
  return layers;
}

// Chrome trace events of one step of a layout, as trace_events: each pass's compute ("F3" the
// forward of micro-batch 3, "B3:1" its backward through the stage's second chunk) and the
// optimizer step on the compute track, every collective (tensor-, data-parallel) on the
// communication track, and each time the compute blocked on communication on the compute-waits
// track, named by what it waited for ("receive" from a neighbouring stage: the pipeline's
// bubble, "send", "tensor-parallel", "data-parallel").
Json parallel_trace_events(const ParallelStepMetrics& metrics,
                           const std::vector<CollectiveEvent>& collectives, int rank,
                           double offset_s) {
  Json events = Json::array();
  auto complete = [&](const std::string& name, const char* category, int track, double start_s,
                      double duration_s, Json args) {
    events.push_back(chrome_complete_event(name, category, rank, track, offset_s + start_s,
                                           std::max(duration_s, 0.0), std::move(args)));
  };
  for (const ParallelStepMetrics::Span& pass : metrics.passes) {
    complete(pass.label, "compute", 0, pass.start_s, pass.duration_s, Json::object());
  }
  const ParallelStepMetrics::Span& step = metrics.optimizer_step;
  complete(step.label, "compute", 0, step.start_s, step.duration_s, Json::object());
  for (const ParallelStepMetrics::Span& wait : metrics.waits) {
    complete(wait.label, "wait", 2, wait.start_s, wait.duration_s, {{"waited_s", wait.duration_s}});
  }
  add_communication_and_peak(events, collectives, metrics.start_s, metrics.peak_memory_bytes, rank,
                             offset_s);
  return events;
}

// `steps` steps of a tensor x pipeline x data layout (CPU ranks only); `steps_done` numbers the
// batches across the plan's turns. With `trace_path`, the last step's events go there.
std::vector<StepFigures> parallel_steps(const GptShape& shape, const ParallelRun& layout,
                                        Communicator& communicator, RankDevice& device,
                                        const ValidationOptions& options, int steps,
                                        int& steps_done, const std::string& trace_path) {
  const ParallelLayout ranks(layout.degrees, layout.order);
  ParallelRuntimeOptions runtime;
  runtime.adam.learning_rate = options.learning_rate;
  runtime.schedule = layout.schedule;
  runtime.chunks_per_stage =
      layout.schedule == PipelineSchedule::interleaved ? layout.chunks_per_stage : 1;
  runtime.micro_batches = layout.micro_batches;
  runtime.layers_per_chunk = layout.layers_per_chunk;
  runtime.sequence_parallel = layout.sequence_parallel;
  runtime.checkpoint_layers = !layout.checkpointed_kinds.empty();
  // One data-parallel mode for every operator, or (3D + OSDP) z2 with some layers ZDP: the
  // modes in the 3D model's order (embedding, each layer's attention and MLP, head).
  if (!layout.modes.empty()) {
    runtime.data_parallel_mode = layout.modes.front();
    runtime.zdp_layers = zdp_layers_of(layout.modes);
  }
  ParallelGpt model(shape, ranks, communicator, initial_gpt_parameters(shape, options.seed),
                    runtime);
  // A data-parallel rank's rows per step: its micro-batches one after another; every tensor and
  // pipeline rank of it takes the same rows.
  const int rows = layout.micro_batch * layout.micro_batches;
  const int data_rank = ranks.coordinates_of(communicator.rank()).data(ranks.degrees());
  communicator.barrier();
  std::vector<StepFigures> figures;
  for (int step = 0; step < steps; ++step) {
    const TokenBatch global =
        make_token_batch(shape, layout.degrees.data * rows, options.seed, steps_done++);
    (void)communicator.take_events();
    const ParallelStepMetrics metrics = model.train_step(global.rows(data_rank * rows, rows));
    if (step + 1 == steps && !trace_path.empty()) {
      const std::vector<CollectiveEvent> collectives = communicator.take_events();
      double offset_s = metrics.start_s - earliest(communicator, device, metrics.start_s);
      if (offset_s > 1.0) offset_s = 0.0;  // other machines' clocks (as the plans' traces)
      write_file_atomically(
          trace_path,
          parallel_trace_events(metrics, collectives, communicator.rank(), offset_s).dump());
    }
    figures.push_back({step, metrics.iteration_time_s, metrics.communication_wait_s,
                       static_cast<double>(metrics.peak_memory_bytes), metrics.loss,
                       metrics.pipeline_wait_s});
  }
  return figures;
}

}  // namespace

std::vector<PlanMeasurement> measure_plans(const GptShape& shape, const std::vector<PlanRun>& plans,
                                           Communicator& communicator, RankDevice& device,
                                           const ValidationOptions& options, int gpus_per_node,
                                           const std::string& trace_directory,
                                           std::vector<ComputeCheck>* compute_check) {
  use_one_compute_thread();
  const int world = communicator.size();
  const int rank = communicator.rank();
  const bool check_compute = compute_check && !plans.empty() && device.device().is_cpu();
  constexpr int check_repetitions = 3;
  // The cluster's speed reference probe, timed the same way (how far this machine's speed has
  // moved since its calibration, on a shape the calibration timed).
  const bool check_speed = check_compute && options.speed_probe.has_value();
  auto time_speed_probe = [&] {
    return time_compute_by_kind(communicator, *options.speed_probe, options.speed_probe_batch_size,
                                check_repetitions);
  };
  std::vector<OperatorPoint> before, reference_before;
  if (check_compute) {
    before =
        time_compute_by_kind(communicator, shape, plans.front().plan.batch_size, check_repetitions);
  }
  if (check_speed) reference_before = time_speed_probe();
  RuntimeOptions runtime;
  runtime.adam.learning_rate = options.learning_rate;
  runtime.prefetch_depth = options.prefetch_depth;
  runtime.backward_prefetch = options.backward_prefetch;
  runtime.dp_all_reduce_after_backward = options.dp_all_reduce_after_backward;
  runtime.gpus_per_node = gpus_per_node;
  runtime.accumulation_steps = options.accumulation_steps;
  // Rounds of plans taking turns: each round builds each plan's model afresh, warms it up and
  // measures its share of the iterations. Peak memory is the highest over all rounds.
  const int rounds = std::clamp(options.rounds, 1, options.iterations);
  std::vector<RankFigures> mine(plans.size());
  std::vector<std::vector<double>> exposed(plans.size());
  std::vector<std::vector<double>> pipeline_waits(plans.size());
  std::vector<std::vector<StepWaitRecord>> wait_records(plans.size());
  std::vector<int> steps_done(plans.size(), 0);
  for (int round = 0; round < rounds; ++round) {
    // Iterations measured in this round: the remainder goes to the first rounds.
    const int measured =
        options.iterations / rounds + (round < options.iterations % rounds ? 1 : 0);
    const int warmup = round == 0 ? options.warmup_iterations : 1;
    const bool last_round = round + 1 == rounds;
    for (std::size_t p = 0; p < plans.size(); ++p) {
      const PlanRun& run = plans[p];
      if (run.layout) {
        const std::string trace_path =
            last_round && !trace_directory.empty()
                ? (fs::path(trace_directory) / fmt::format("{}.rank{}.json", run.name, rank))
                      .string()
                : std::string();
        for (const StepFigures& step :
             parallel_steps(shape, *run.layout, communicator, device, options, warmup + measured,
                            steps_done[p], trace_path)) {
          if (step.index < warmup) continue;
          mine[p].iteration_times_s.push_back(step.iteration_time_s);
          exposed[p].push_back(step.exposed_communication_s);
          pipeline_waits[p].push_back(step.pipeline_wait_s);
          mine[p].peak_memory_bytes = std::max(mine[p].peak_memory_bytes, step.peak_memory_bytes);
          mine[p].loss = step.loss;
        }
        continue;
      }
      // A rank's rows per step: its micro-batches one after another.
      const int b = run.plan.batch_size * options.accumulation_steps;
      ShardedGpt model(shape, run.plan, communicator, initial_gpt_parameters(shape, options.seed),
                       runtime, device);
      const int total = warmup + measured;
      communicator.barrier();
      for (int step = 0; step < total; ++step) {
        const TokenBatch global = make_token_batch(shape, world * b, options.seed, steps_done[p]++);
        (void)communicator.take_events();
        const StepMetrics metrics = model.train_step(global.rows(rank * b, b));
        const std::vector<CollectiveEvent> collectives = communicator.take_events();
        if (last_round && step + 1 == total && !trace_directory.empty()) {
          // Ranks on other machines have other steady clocks: a skew beyond a second cannot
          // be one step's, so those traces stay on their own time base.
          double offset_s = metrics.start_s - earliest(communicator, device, metrics.start_s);
          if (offset_s > 1.0) offset_s = 0.0;
          write_file_atomically(
              (fs::path(trace_directory) / fmt::format("{}.rank{}.json", run.name, rank)).string(),
              trace_events(shape, run.plan, metrics, collectives, rank, offset_s).dump());
        }
        if (step < warmup) continue;
        wait_records[p].push_back(step_wait_record(metrics, collectives, world));
        mine[p].iteration_times_s.push_back(metrics.iteration_time_s);
        exposed[p].push_back(metrics.exposed_communication_s);
        mine[p].peak_memory_bytes =
            std::max(mine[p].peak_memory_bytes, static_cast<double>(metrics.peak_memory_bytes));
        mine[p].loss = metrics.loss;
      }
    }
  }
  std::vector<PlanMeasurement> measurements;
  for (std::size_t p = 0; p < plans.size(); ++p) {
    mine[p].iteration_time_s = median_of(mine[p].iteration_times_s);
    mine[p].exposed_communication_s = median_of(exposed[p]);
    mine[p].exposed_communication_steps_s = exposed[p];
    mine[p].pipeline_wait_s = median_of(pipeline_waits[p]);
    if (!plans[p].layout) {
      mine[p].peer_wait_steps_s = exchange_peer_waits(communicator, device, wait_records[p]);
    }
    const bool has_peer_waits = !mine[p].peer_wait_steps_s.empty();
    // Every rank's figures and iteration times, gathered on every rank.
    const int count = options.iterations;
    const int per_rank = figures_per_rank + 3 * count;
    at::Tensor figures = at::zeros({world * per_rank}, at::kDouble);
    double* slot = figures.data_ptr<double>() + rank * per_rank;
    slot[0] = mine[p].iteration_time_s;
    slot[1] = mine[p].exposed_communication_s;
    slot[2] = mine[p].peak_memory_bytes;
    slot[3] = mine[p].loss;
    slot[4] = mine[p].pipeline_wait_s;
    slot[5] = has_peer_waits ? 1.0 : 0.0;
    std::copy(mine[p].iteration_times_s.begin(), mine[p].iteration_times_s.end(),
              slot + figures_per_rank);
    std::copy(mine[p].exposed_communication_steps_s.begin(),
              mine[p].exposed_communication_steps_s.end(), slot + figures_per_rank + count);
    std::copy(mine[p].peer_wait_steps_s.begin(), mine[p].peer_wait_steps_s.end(),
              slot + figures_per_rank + 2 * count);
    figures = gathered_on_every_rank(communicator, device, figures);
    PlanMeasurement measurement;
    measurement.name = plans[p].name;
    for (int r = 0; r < world; ++r) {
      const double* f = figures.data_ptr<double>() + r * per_rank;
      const double* times = f + figures_per_rank;
      const double* exposed_steps = times + count;
      const double* peer_steps = exposed_steps + count;
      measurement.ranks.push_back({f[0], f[1], f[2], f[3],
                                   std::vector<double>(times, times + count), f[4],
                                   std::vector<double>(exposed_steps, exposed_steps + count),
                                   f[5] == 1.0 ? std::vector<double>(peer_steps, peer_steps + count)
                                               : std::vector<double>()});
    }
    measurements.push_back(std::move(measurement));
  }
  if (check_compute) {
    const std::vector<OperatorPoint> after =
        time_compute_by_kind(communicator, shape, plans.front().plan.batch_size, check_repetitions);
    compute_check->clear();
    auto add_checks = [&](const std::vector<OperatorPoint>& first,
                          const std::vector<OperatorPoint>& last, bool speed_reference) {
      for (std::size_t k = 0; k < first.size() && k < last.size(); ++k) {
        compute_check->push_back({first[k].kind, first[k].batch_size, first[k].calls,
                                  first[k].forward_s + first[k].backward_s,
                                  last[k].forward_s + last[k].backward_s, speed_reference});
      }
    };
    add_checks(before, after, false);
    if (check_speed) add_checks(reference_before, time_speed_probe(), true);
  }
  return measurements;
}

int merge_measured_trace(const std::string& directory, const std::string& plan, int ranks,
                         const std::string& path) {
  Json events = Json::array();
  int merged = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    const fs::path file = fs::path(directory) / fmt::format("{}.rank{}.json", plan, rank);
    if (!fs::exists(file)) continue;
    ++merged;
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args", {{"name", fmt::format("rank {}", rank)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 1},
                      {"args", {{"name", "communication"}}}});
    Json rank_events = read_json_file(file.string());
    // The compute thread's waits, where the rank recorded any.
    const bool has_waits = std::any_of(rank_events.begin(), rank_events.end(), [](const Json& e) {
      return e.value("cat", std::string()) == "wait";
    });
    if (has_waits) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", rank},
                        {"tid", 2},
                        {"args", {{"name", "compute waits"}}}});
    }
    for (auto& event : rank_events) events.push_back(std::move(event));
  }
  write_file_atomically(path, Json{{"traceEvents", std::move(events)},
                                   {"displayTimeUnit", "ms"},
                                   {"otherData", {{"plan", plan}, {"source", "measured"}}}}
                                  .dump());
  return merged;
}

std::optional<std::vector<PlanMeasurement>> run_measurements(
    const GptShape& shape, const std::vector<PlanRun>& plans, int local_ranks,
    const ValidationOptions& options, int gpus_per_node, const std::string& trace_directory,
    std::vector<ComputeCheck>* compute_check) {
  if (const auto environment = rank_from_environment()) {
    ConnectOptions connect = launched_rank_connection(*environment, options.collective_timeout);
    try {
      auto device = make_rank_device(options.device, environment->local_rank);
      connect.backend = device->backend();
      connect.cuda_device = environment->local_rank;
      auto communicator = Communicator::connect(connect);
      if (connect.backend == CommBackend::gloo) let_communication_preempt_compute();
      const std::string raw =
          trace_directory.empty() ? "" : (fs::path(trace_directory) / "ranks").string();
      auto measurements = measure_plans(shape, plans, *communicator, *device, options,
                                        gpus_per_node, raw, compute_check);
      if (environment->rank != 0) return std::nullopt;
      // Ranks on other machines wrote their events there only if the directory is shared.
      for (const auto& plan : plans) {
        if (!raw.empty()) {
          merge_measured_trace(
              raw, plan.name, environment->world_size,
              (fs::path(trace_directory) / (plan.name + ".measured.json")).string());
        }
      }
      return measurements;
    } catch (const CollectiveError& error) {
      throw RunFailure(error.what());
    }
  }

  const fs::path directory = fs::temp_directory_path() /
                             fmt::format("osdp-validate-{}-{}", ::getpid(), std::random_device()());
  fs::create_directories(directory);
  const std::string results = (directory / "measurements.json").string();
  const std::string checks = (directory / "compute_check.json").string();
  const LaunchResult launched = launch_local_ranks(
      local_ranks,
      [&](int rank) {
        ConnectOptions connect = local_rank_connection(
            rank, local_ranks, (directory / "store").string(), options.collective_timeout);
        auto device = make_rank_device(options.device, rank);
        connect.backend = device->backend();
        connect.cuda_device = rank;
        auto communicator = Communicator::connect(connect);
        if (connect.backend == CommBackend::gloo) let_communication_preempt_compute();
        std::vector<ComputeCheck> check;
        const auto measurements =
            measure_plans(shape, plans, *communicator, *device, options, gpus_per_node,
                          directory.string(), compute_check ? &check : nullptr);
        if (rank == 0) {
          write_file_atomically(checks,
                                Json{{"compute_check", compute_check_to_json(check)}}.dump());
          write_file_atomically(results, measurements_to_json(measurements).dump(1));
        }
        return 0;
      },
      std::chrono::seconds(5));
  std::optional<std::vector<PlanMeasurement>> measurements;
  if (launched.ok) {
    measurements = measurements_from_json(read_json_file(results));
    if (compute_check) {
      const Json document = read_json_file(checks);
      *compute_check = compute_check_from_json(JsonReader(document, checks), "compute_check");
    }
    for (const auto& plan : plans) {
      if (!trace_directory.empty()) {
        merge_measured_trace(directory.string(), plan.name, local_ranks,
                             (fs::path(trace_directory) / (plan.name + ".measured.json")).string());
      }
    }
  }
  remove_directory_tree(directory);
  throw_if_failed(launched, "validation");
  return measurements;
}

}  // namespace osdp::validate
