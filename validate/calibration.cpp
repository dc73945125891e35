#include "validate/calibration.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "validate/alpha_beta_fit.hpp"
#include "validate/calibration_report.hpp"
#include "validate/compute_threads.hpp"
#include "validate/launch.hpp"
#include "validate/measurement.hpp"
#include "validate/rank_device.hpp"
#include "validate/rank_runner.hpp"
#include "validate/runtime_process.hpp"
#include "validate/sharded_gpt.hpp"

namespace osdp::validate {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The middle of the calibration's batch sizes: the speed reference's, the slicing probe's, the
// in-training runs' and the blocking sync's.
int reference_batch_size(const CalibrationOptions& options) {
  return options.batch_sizes[options.batch_sizes.size() / 2];
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// Rank 0's value for everyone (an all-reduce of a buffer that only rank 0 fills).
double from_rank0(Communicator& comm, double value) {
  at::Tensor buffer = at::zeros({comm.size()}, at::kDouble);
  if (comm.rank() == 0) buffer[0] = value;
  comm.run(CollectiveKind::all_reduce, buffer);
  return buffer[0].item<double>();
}

// CPU seconds of every thread of this process so far.
double process_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// The mean of each run of `per_sample` consecutive calls.
std::vector<double> sample_means(const std::vector<double>& call_times_s, int per_sample) {
  std::vector<double> means;
  for (std::size_t first = 0; first + per_sample <= call_times_s.size(); first += per_sample) {
    double sum_s = 0;
    for (int call = 0; call < per_sample; ++call) sum_s += call_times_s[first + call];
    means.push_back(sum_s / per_sample);
  }
  return means;
}

struct ArrivalSpread {
  double last_arrival_time_s = 0;
  double spread_s = 0;
};

// Each call's time on every rank of `group` (empty: all), compared call by call: the ranks'
// collective ends alike, so the shortest is the rank that came last and the longest less the
// shortest how much earlier the first came (no clock shared between the ranks needed).
ArrivalSpread arrival_spread(Communicator& comm, const std::vector<double>& call_times_s,
                             const std::vector<int>& group) {
  const int64_t members = group.empty() ? comm.size() : static_cast<int64_t>(group.size());
  const int64_t me = group.empty()
                         ? comm.rank()
                         : std::find(group.begin(), group.end(), comm.rank()) - group.begin();
  const auto calls = static_cast<int64_t>(call_times_s.size());
  if (calls == 0) return {};
  at::Tensor times = at::zeros({members * calls}, at::kDouble);
  times.narrow(0, me * calls, calls)
      .copy_(at::tensor(at::ArrayRef<double>(call_times_s), at::kDouble));
  comm.run(CollectiveKind::all_reduce, times, group);  // each rank fills its own row
  const at::Tensor by_rank = times.view({members, calls});
  const at::Tensor shortest = std::get<0>(by_rank.min(0));
  const at::Tensor longest = std::get<0>(by_rank.max(0));
  return {shortest.mean().item<double>(), (longest - shortest).mean().item<double>()};
}

// Over `group` (global ranks; empty: all): every rank calls with its own group, all at once.
std::vector<CollectivePoint> time_collectives(Communicator& comm, const CalibrationOptions& options,
                                              const std::vector<int>& group = {}) {
  const int n = group.empty() ? comm.size() : static_cast<int>(group.size());
  struct Probe {
    CollectiveKind kind;
    at::Tensor buffer;
    std::vector<double> call_times_s;  // every timed call's, as a step issues it
    std::vector<double> back_to_back_times_s;
    std::vector<double> cpu_fractions;
  };
  std::vector<Probe> probes;
  for (CollectiveKind kind :
       {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}) {
    for (double bytes : options.message_bytes) {
      const int64_t elements = std::max<int64_t>(n, static_cast<int64_t>(bytes / 4) / n * n);
      probes.push_back({kind, at::ones({elements}, at::kFloat), {}, {}, {}});
    }
  }
  // Rounds over every (collective, size), the first one a warm-up: a slow spell of the machine
  // (wake-ups of idle cores took a scheduler tick, 4 ms, for a while here) then touches one
  // sample of many points instead of every sample of a few. Each collective is timed two ways:
  // - as a training step issues it, which is what the cluster gets: after a stretch of compute
  //   (about a millisecond) on every rank, from the computing thread, which then waits for it.
  //   The communication and transport threads have gone to sleep meanwhile and must be woken,
  //   and each rank arrives when its own compute ends; steps of the testbed's runtime showed
  //   collectives 0.4-0.9 ms longer each than back-to-back calls, which left every sharded plan
  //   simulated 10-36 % fast. A sample is the mean of 4 such calls; the point is the mean of
  //   the samples (a heavy tail of wake-ups of a few ms adds up over a step: a median would
  //   drop it);
  // - back-to-back, as nccl-tests times them (after a barrier and one call, 4 calls in a row),
  //   for comparison, with the share of a core the transport keeps busy.
  constexpr int calls_per_sample = 4;
  at::Tensor work = at::rand({256, 256}, at::kFloat);  // about 1 ms of compute between calls
  for (int round = 0; round <= options.collective_rounds; ++round) {
    for (Probe& probe : probes) {
      comm.barrier();
      comm.run(probe.kind, probe.buffer, group);  // the ranks awake and in step
      const double cpu_start_s = process_cpu_s();
      const auto start = Clock::now();
      for (int call = 0; call < calls_per_sample; ++call) {
        comm.run(probe.kind, probe.buffer, group);
      }
      const double wall_s = seconds_since(start);
      const double cpu_s = process_cpu_s() - cpu_start_s;
      for (int call = 0; call < calls_per_sample; ++call) {
        for (int product = 0; product < 2; ++product) work = at::mm(work, work).div_(256.0);
        const auto issued = Clock::now();
        comm.run(probe.kind, probe.buffer, group);
        if (round > 0) probe.call_times_s.push_back(seconds_since(issued));
      }
      if (round > 0) {
        probe.back_to_back_times_s.push_back(wall_s / calls_per_sample);
        probe.cpu_fractions.push_back(cpu_s / wall_s);
      }
    }
  }
  std::vector<CollectivePoint> points;
  for (const Probe& probe : probes) {
    CollectivePoint point;
    point.kind = probe.kind;
    point.bytes = static_cast<double>(probe.buffer.nbytes());
    const std::vector<double> issued_times_s = sample_means(probe.call_times_s, calls_per_sample);
    point.time_s = from_rank0(comm, mean(issued_times_s));
    const Spread issued = spread_of(issued_times_s);
    point.time_q1_s = from_rank0(comm, issued.first_quartile_s);
    point.time_q3_s = from_rank0(comm, issued.third_quartile_s);
    point.back_to_back_time_s = from_rank0(comm, median_of(probe.back_to_back_times_s));
    point.step_bytes = ring_step_bytes(point.bytes, n);
    point.step_time_s =
        ring_steps(probe.kind, n) > 0 ? point.time_s / ring_steps(probe.kind, n) : 0.0;
    point.bus_bandwidth_Bps = point.bytes / point.time_s * bus_bandwidth_factor(probe.kind, n);
    point.cpu_fraction = from_rank0(comm, median_of(probe.cpu_fractions));
    const ArrivalSpread arrival = arrival_spread(comm, probe.call_times_s, group);
    point.last_arrival_time_s = arrival.last_arrival_time_s;
    point.arrival_spread_s = arrival.spread_s;
    points.push_back(point);
  }
  return points;
}

// A communicator of this rank alone (its collectives are no-ops), for timing compute.
std::unique_ptr<Communicator> connect_solo(std::chrono::milliseconds timeout) {
  ConnectOptions solo;
  solo.store = ConnectOptions::StoreKind::in_process;
  solo.timeout = timeout;
  return Communicator::connect(solo);
}

// What every probe model of one calibration shares: the probe's initial parameters, drawn once
// (a 1 B-parameter probe takes seconds to draw), and the device its tensors live on (nullptr:
// the CPU, which ShardedGpt makes itself).
struct ProbeSetup {
  NamedTensors initial;
  RankDevice* device = nullptr;

  std::unique_ptr<ShardedGpt> model(const GptShape& shape, const Plan& plan,
                                    Communicator& comm) const {
    if (device == nullptr) {
      return std::make_unique<ShardedGpt>(shape, plan, comm, initial, RuntimeOptions{});
    }
    return std::make_unique<ShardedGpt>(shape, plan, comm, initial, RuntimeOptions{}, *device);
  }
  // The device's queued kernels done, so that a clock read next sees them (GPUs run them
  // asynchronously).
  void synchronize() const {
    if (device != nullptr) device->synchronize();
  }
  at::TensorOptions float_options() const {
    return at::TensorOptions().dtype(at::kFloat).device(device ? device->device() : at::kCPU);
  }
};

struct ProbeRun {
  std::vector<StepMetrics> steps;
  std::vector<CollectiveEvent> collectives;  // of those steps, in issue order
};

// Training steps of `plan` on the probe, the first one a warm-up that is not kept.
ProbeRun train_probe(Communicator& comm, const CalibrationOptions& options, const ProbeSetup& setup,
                     const Plan& plan, int steps) {
  const int n = comm.size();
  const int b = plan.batch_size;
  const std::unique_ptr<ShardedGpt> model = setup.model(options.probe, plan, comm);
  ProbeRun run;
  for (int step = 0; step < 1 + steps; ++step) {
    const TokenBatch data = make_token_batch(options.probe, n * b, 1, step);
    StepMetrics metrics = model->train_step(data.rows(comm.rank() * b, b));
    if (step == 0) (void)comm.take_events();
    if (step > 0) run.steps.push_back(std::move(metrics));
  }
  run.collectives = comm.take_events();
  return run;
}

// Seconds of [start, end) covered by the collectives (one communication thread: disjoint).
double covered_s(double start, double end, const std::vector<CollectiveEvent>& collectives) {
  double covered = 0;
  for (const CollectiveEvent& event : collectives) {
    covered += std::max(0.0, std::min(end, event.end_s) - std::max(start, event.start_s));
  }
  return covered;
}

// The compute slowdown under overlap as the simulator applies it (work runs 1/s as fast while
// a collective is in flight), from a training run: measured compute M of each operator phase
// against its calibrated law C, and O, the part of M that ran beside a collective. O at 1/s
// holds O/s of work, so M - C = O (1 - 1/s). Sums over this rank's phases; all ranks pooled.
double overlap_slowdown_in_training(Communicator& comm, const ProbeRun& run, const CostModel& laws,
                                    int batch) {
  double extra_s = 0;
  double overlapped_s = 0;
  for (const StepMetrics& step : run.steps) {
    // Phases in time order; each one's compute ends where the next phase starts (its waits
    // for gathers come first, at its start).
    struct PhaseTiming {
      double start_s, compute_s, clean_s;
    };
    std::vector<PhaseTiming> phases;
    const int ops = static_cast<int>(step.operators.size());
    for (int i = 0; i < ops; ++i) {
      phases.push_back({step.operators[i].forward_start_s, step.operators[i].forward_s,
                        laws.forward_compute_s(i).at(batch)});
    }
    for (int i = ops - 1; i >= 0; --i) {
      phases.push_back({step.operators[i].backward_start_s, step.operators[i].backward_s,
                        laws.backward_compute_s(i).at(batch)});
    }
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const double end_s =
          p + 1 < phases.size() ? phases[p + 1].start_s : phases[p].start_s + phases[p].compute_s;
      const double compute_end = step.start_s + end_s;
      const double compute_start = compute_end - phases[p].compute_s;
      extra_s += phases[p].compute_s - phases[p].clean_s;
      overlapped_s += covered_s(compute_start, compute_end, run.collectives);
    }
  }
  // Two sums, in a ring buffer padded to a multiple of the ranks (any number of them).
  at::Tensor sums = at::zeros({2 * comm.size()}, at::kDouble);
  sums[0] = extra_s;
  sums[1] = overlapped_s;
  comm.run(CollectiveKind::all_reduce, sums);
  const double extra = sums[0].item<double>();
  const double overlapped = sums[1].item<double>();
  if (overlapped <= 0 || extra <= 0) return 1.0;
  // At most 4x: more would say that compute all but stops while a collective runs.
  return extra >= 0.75 * overlapped ? 4.0 : overlapped / (overlapped - extra);
}

// Every rank's values, indexed [rank][i]; each rank passes as many, in the same order.
std::vector<std::vector<double>> values_of_every_rank(Communicator& comm,
                                                      const std::vector<double>& mine) {
  const int n = comm.size();
  const auto count = static_cast<int64_t>(mine.size());
  std::vector<std::vector<double>> all(n, std::vector<double>(mine.size()));
  if (count == 0) return all;
  at::Tensor gathered = at::zeros({n * count}, at::kDouble);
  gathered.narrow(0, comm.rank() * count, count)
      .copy_(at::tensor(at::ArrayRef<double>(mine), at::kDouble));
  comm.run(CollectiveKind::all_gather, gathered);
  const auto values = gathered.accessor<double, 1>();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) all[r][i] = values[r * count + i];
  }
  return all;
}

// How much longer the collectives of a training step take than the same collectives alone, by
// step size: for the collectives whose ring step falls in each segment of the standalone fit,
// the sum of (last rank's end - last rank's start) over the sum of their standalone times; the
// overall ratio for segments no collective of the step fell in. On CPU ranks the collectives
// share the cores with the compute threads; a few take many times longer, so a median would
// say too little.
ContentionBySize collective_contention(Communicator& comm,
                                       const std::vector<CollectiveEvent>& events,
                                       const GroupTiming& standalone) {
  const int n = comm.size();
  const auto count = static_cast<int64_t>(events.size());
  // Every rank's (start, end) pairs: ranks issue the same collectives in one order.
  std::vector<double> mine;
  for (const CollectiveEvent& event : events) {
    mine.push_back(event.start_s);
    mine.push_back(event.end_s);
  }
  const std::vector<std::vector<double>> all = values_of_every_rank(comm, mine);
  // Segment boundaries: the standalone fit's (the same message sizes for every collective).
  ContentionBySize contention;
  for (const auto& segment : standalone.all_gather.by_size) {
    contention.min_step_bytes.push_back(segment.min_step_bytes);
  }
  if (contention.min_step_bytes.empty()) contention.min_step_bytes.push_back(0.0);
  const std::size_t segments = contention.min_step_bytes.size();
  std::vector<double> in_training_s(segments + 1, 0.0), alone_s(segments + 1, 0.0);
  for (int64_t i = 0; i < count; ++i) {
    double start = 0, end = 0;
    for (int r = 0; r < n; ++r) {
      start = std::max(start, all[r][2 * i]);
      end = std::max(end, all[r][2 * i + 1]);
    }
    const CollectiveEvent& event = events[i];
    const double step_bytes = ring_step_bytes(event.bytes, event.ranks);
    std::size_t segment = 0;
    while (segment + 1 < segments && contention.min_step_bytes[segment + 1] <= step_bytes) {
      ++segment;
    }
    const double alone = standalone.time_s(event.kind, event.bytes, event.ranks);
    for (std::size_t slot : {segment, segments}) {  // its segment, and the total
      in_training_s[slot] += std::max(0.0, end - start);
      alone_s[slot] += alone;
    }
  }
  auto ratio = [&](std::size_t slot, double otherwise) {
    return alone_s[slot] > 0 && in_training_s[slot] > 0 ? in_training_s[slot] / alone_s[slot]
                                                        : otherwise;
  };
  contention.overall = from_rank0(comm, ratio(segments, 1.0));
  for (std::size_t segment = 0; segment < segments; ++segment) {
    contention.factors.push_back(from_rank0(comm, ratio(segment, contention.overall)));
  }
  return contention;
}

// The slowest rank's and the ranks' mean value at `index` of every rank's values.
struct SlowestAndMean {
  double slowest = 0;
  double mean = 0;
};
SlowestAndMean slowest_and_mean(const std::vector<std::vector<double>>& every_rank,
                                std::size_t index) {
  SlowestAndMean figures;
  for (const std::vector<double>& values : every_rank) {
    figures.slowest = std::max(figures.slowest, values[index]);
    figures.mean += values[index] / static_cast<double>(every_rank.size());
  }
  return figures;
}

// The slowest rank's time over the ranks' mean, summed over phases: each rank passes its own
// phase times, in the same order. Ranks that meet at every collective run at the pace of the
// slowest, which jitter makes slower than the average.
double slowest_over_mean(Communicator& comm, const std::vector<double>& mine) {
  if (mine.empty() || comm.size() < 2) return 1.0;
  const std::vector<std::vector<double>> all = values_of_every_rank(comm, mine);
  double slowest_s = 0, mean_s = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const SlowestAndMean phase = slowest_and_mean(all, i);
    slowest_s += phase.slowest;
    mean_s += phase.mean;
  }
  return mean_s > 0 ? std::max(1.0, slowest_s / mean_s) : 1.0;
}

// The slowest rank's compute of a whole step over the ranks' mean, the median over the steps:
// ranks that meet only at the step's end (data-parallel replicas that share no tensor or
// pipeline group) wait for the slowest one's whole step, not phase by phase.
double slowest_step_over_mean(Communicator& comm,
                              const std::vector<std::vector<StepMetrics::OperatorTiming>>& steps) {
  if (steps.empty() || comm.size() < 2) return 1.0;
  std::vector<double> mine;
  for (const auto& step : steps) {
    double total_s = 0;
    for (const auto& op : step) total_s += op.forward_s + op.backward_s;
    mine.push_back(total_s);
  }
  const std::vector<std::vector<double>> all = values_of_every_rank(comm, mine);
  std::vector<double> ratios;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const SlowestAndMean step = slowest_and_mean(all, i);
    if (step.mean > 0) ratios.push_back(std::max(1.0, step.slowest / step.mean));
  }
  return ratios.empty() ? 1.0 : median_of(ratios);
}

// Each operator's forward and backward time of one step, appended in order.
void append_phase_times(const std::vector<StepMetrics::OperatorTiming>& operators,
                        std::vector<double>& times) {
  for (const auto& op : operators) {
    times.push_back(op.forward_s);
    times.push_back(op.backward_s);
  }
}

// Straggling in a training step: every phase of every step (each operator's forward and
// backward, the update).
double straggler_slowdown(Communicator& comm, const ProbeRun& run) {
  std::vector<double> mine;
  for (const StepMetrics& step : run.steps) {
    append_phase_times(step.operators, mine);
    mine.push_back(step.optimizer_step_s);
  }
  return slowest_over_mean(comm, mine);
}

// Per segment and overall, the median over the probe runs (every run has the same segments).
ContentionBySize median_contention(const std::vector<ContentionBySize>& runs) {
  ContentionBySize result = runs.front();
  std::vector<double> values;
  for (const ContentionBySize& run : runs) values.push_back(run.overall);
  result.overall = median_of(values);
  for (std::size_t s = 0; s < result.factors.size(); ++s) {
    values.clear();
    for (const ContentionBySize& run : runs) values.push_back(run.factors[s]);
    result.factors[s] = median_of(values);
  }
  return result;
}

// Slices that the runtime can cut every operator of the probe into (heads, hidden units).
int probe_slices(const GptShape& probe) {
  int slices = 4;
  while (slices > 1 && (probe.heads % slices != 0 || probe.hidden % slices != 0)) slices /= 2;
  return slices;
}

// Per-kind compute of `plan` on the probe (forward and backward medians over the steps, summed
// over the kind's operators), on `solo` (no collective overlaps it) with every rank computing.
// With `straggling`, also the slowest rank's compute over the mean, phase by phase, and with
// `step_straggling` step by step.
std::map<std::string, OperatorPoint> time_operators(Communicator& comm, Communicator& solo,
                                                    const GptShape& shape, int repetitions,
                                                    const ProbeSetup& setup,
                                                    const Workload& workload, const Plan& plan,
                                                    double* straggling = nullptr,
                                                    double* step_straggling = nullptr) {
  const int n = comm.size();
  const int batch = plan.batch_size;
  comm.barrier();
  const std::unique_ptr<ShardedGpt> model = setup.model(shape, plan, solo);
  std::vector<std::vector<StepMetrics::OperatorTiming>> steps;
  for (int step = 0; step < 1 + repetitions; ++step) {
    const TokenBatch data = make_token_batch(shape, n * batch, 1, step);
    const StepMetrics metrics = model->train_step(data.rows(comm.rank() * batch, batch));
    if (step > 0) steps.push_back(metrics.operators);
  }
  if (straggling != nullptr) {
    std::vector<double> mine;
    for (const auto& step : steps) append_phase_times(step, mine);
    *straggling = slowest_over_mean(comm, mine);
  }
  if (step_straggling != nullptr) *step_straggling = slowest_step_over_mean(comm, steps);
  // Every operator's forward and backward median over the steps, averaged over the ranks: with
  // more ranks than cores one rank's times swing with which ranks share its core (rounds of a
  // point 50-90 % apart at small batches, 4 ranks on 2 cores), and the laws stand for the mean
  // rank (straggling is apart). One gather for all of them.
  std::vector<double> medians;
  for (int i = 0; i < workload.size(); ++i) {
    std::vector<double> forward, backward;
    for (const auto& step : steps) {
      forward.push_back(step[i].forward_s);
      backward.push_back(step[i].backward_s);
    }
    medians.push_back(median_of(forward));
    medians.push_back(median_of(backward));
  }
  std::vector<double> mean_medians(medians.size(), 0.0);
  for (const std::vector<double>& rank_medians : values_of_every_rank(comm, medians)) {
    for (std::size_t k = 0; k < medians.size(); ++k) mean_medians[k] += rank_medians[k] / n;
  }
  std::map<std::string, OperatorPoint> by_kind;
  for (int i = 0; i < workload.size(); ++i) {
    const Operator& op = workload.op(i);
    OperatorPoint& point = by_kind[std::string(operator_kind_name(op.kind))];
    point.kind = operator_kind_name(op.kind);
    point.probe = probe_label(shape);
    point.batch_size = batch;
    point.forward_s += mean_medians[2 * i];
    point.backward_s += mean_medians[2 * i + 1];
    point.flops += batch * (op.forward_flops_per_sample + op.backward_flops_per_sample);
    point.forward_flops_per_sample += op.forward_flops_per_sample;
    point.backward_flops_per_sample += op.backward_flops_per_sample;
    point.activation_bytes_per_sample += op.activation_bytes_per_sample;
    point.calls += 1;
  }
  return by_kind;
}

// A point's forward and backward as the law sees them: the cost model charges a backward twice
// its forward's activation bytes.
std::pair<ComputeSample, ComputeSample> samples_of(const OperatorPoint& point) {
  const double bytes = point.batch_size * point.activation_bytes_per_sample;
  return {{point.calls, point.batch_size * point.forward_flops_per_sample, point.forward_s, bytes},
          {point.calls, point.batch_size * point.backward_flops_per_sample, point.backward_s,
           2 * bytes}};
}

}  // namespace

std::map<std::string, OperatorCompute, std::less<>> fit_operator_compute(
    const std::vector<OperatorPoint>& points) {
  std::map<std::string, std::vector<const OperatorPoint*>> by_kind;
  for (const auto& point : points) by_kind[point.kind].push_back(&point);
  std::map<std::string, OperatorCompute, std::less<>> laws;
  for (const auto& [kind, kind_points] : by_kind) {
    std::vector<ComputeSample> forward, backward;
    for (const OperatorPoint* point : kind_points) {
      const auto [forward_sample, backward_sample] = samples_of(*point);
      forward.push_back(forward_sample);
      backward.push_back(backward_sample);
    }
    laws[kind] = {fit_compute_law(forward), fit_compute_law(backward)};
  }
  return laws;
}

Cluster refit_operator_compute(Cluster kept, const CalibrationResult& measured) {
  // Kinds the report timed get new laws; any other keeps its own.
  for (auto& [kind, law] : fit_operator_compute(measured.operators)) {
    kept.gpu.operator_compute[kind] = law;
  }
  for (const SlicingPoint& point : measured.slicing) {
    // A kind sliced but never timed whole has no law to add the slices to.
    const auto law = kept.gpu.operator_compute.find(point.kind);
    if (law == kept.gpu.operator_compute.end()) continue;
    law->second.forward.extra_slice_s = point.forward_s;
    law->second.backward.extra_slice_s = point.backward_s;
  }
  return kept;
}

double operator_law_s(const OperatorCompute& law, const OperatorPoint& point) {
  const auto [forward, backward] = samples_of(point);
  return compute_law_s(law.forward, forward) + compute_law_s(law.backward, backward);
}

namespace {

// Compute laws: a run of the probe GPT at each batch size, per-operator compute time. Every
// rank computes at once (as in training) but over a communicator of its own, so that no
// gradient all-reduce overlaps the compute: the simulator adds the overlap slowdown itself.
// Every probe shape (the main probe first) is timed in each round.
struct ComputeProbe {
  GptShape shape;
  ProbeSetup setup;
  Workload workload;
};

void measure_compute(Communicator& comm, Communicator& solo, const CalibrationOptions& options,
                     const std::vector<ComputeProbe>& probes, CalibrationResult& result) {
  // Rounds over the batch sizes (1 2 4 8, 1 2 4 8, ...), each point the median of its rounds: a
  // machine whose speed drifts while it is calibrated (this VM's compute by 20-30 % within
  // minutes) then moves every batch size alike instead of tilting the fitted law, whose fixed
  // part varied 0-1.1 ms between calibrations when each batch size was timed once in turn.
  const int rounds = std::max(1, options.compute_rounds);
  CalibrationOptions per_round = options;
  per_round.repetitions = std::max(2, (options.repetitions + rounds - 1) / rounds);
  std::map<std::tuple<std::size_t, int, std::string>, std::vector<OperatorPoint>> samples;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t p = 0; p < probes.size(); ++p) {
      const ComputeProbe& probe = probes[p];
      for (int batch : options.batch_sizes) {
        Plan plan;
        plan.batch_size = batch;
        plan.choices.assign(probe.shape.operators(), OperatorChoice::whole(Mode::dp));
        double straggling = 1.0;
        double step_straggling = 1.0;
        for (auto& [kind, point] :
             time_operators(comm, solo, probe.shape, per_round.repetitions, probe.setup,
                            probe.workload, plan, &straggling, &step_straggling)) {
          samples[{p, batch, kind}].push_back(point);
        }
        result.compute_straggling_runs.push_back(straggling);
        result.step_straggling_runs.push_back(step_straggling);
      }
    }
  }
  double total_flops = 0;
  double total_s = 0;
  for (const auto& [key, points] : samples) {  // by probe, batch size, then kind
    OperatorPoint point = points.front();
    std::vector<double> forward, backward;
    for (const OperatorPoint& sample : points) {
      forward.push_back(sample.forward_s);
      backward.push_back(sample.backward_s);
    }
    point.forward_s = median_of(forward);
    point.backward_s = median_of(backward);
    // The spread of the rounds: (slowest - fastest) / median of forward + backward.
    std::vector<double> both;
    for (std::size_t r = 0; r < forward.size(); ++r) both.push_back(forward[r] + backward[r]);
    const auto [fastest, slowest] = std::minmax_element(both.begin(), both.end());
    point.round_spread = (*slowest - *fastest) / (point.forward_s + point.backward_s);
    point.rounds = static_cast<int>(both.size());
    if (std::get<1>(key) == options.batch_sizes.back()) {
      total_flops += point.flops;
      total_s += point.forward_s + point.backward_s;
    }
    result.operators.push_back(point);
  }
  result.compute_flops_per_s = total_s > 0 ? total_flops / total_s : 0.0;
  result.compute_straggler_slowdown = median_of(result.compute_straggling_runs);
  result.step_straggling = median_of(result.step_straggling_runs);
}

}  // namespace

double extra_per_call_s(const std::vector<PairedTimes>& rounds, double extra_calls) {
  if (rounds.empty() || extra_calls <= 0) return 0.0;
  std::vector<double> differences;
  for (const PairedTimes& round : rounds) differences.push_back(round.with_s - round.without_s);
  // One round's difference may come out below zero (noise); their median may not.
  return std::max(0.0, median_of(differences) / extra_calls);
}

namespace {

// Splitting: what each slice after the first adds, by kind: the middle batch size with every
// operator but the embedding in k slices against the whole operators, timed back to back in each
// round (the order alternating) and the median of the rounds' differences kept. The difference
// is a small share of either time, so a drift of the machine's speed between the two runs
// swamps it: timed minutes apart (the sliced run after the compute laws), two calibrations of
// this 2-core VM three hours apart found 0.1-0.6 ms and 1.6-4.1 ms a slice, and the second
// simulated `zdp-4-slices` of local-cpu-long 50 % over its measured time.
std::vector<SlicingPoint> measure_slicing(Communicator& comm, Communicator& solo,
                                          const CalibrationOptions& options,
                                          const ProbeSetup& setup, const Workload& workload) {
  std::vector<SlicingPoint> slicing;
  const int k = probe_slices(options.probe);
  if (k <= 1) return slicing;
  Plan whole_plan;
  whole_plan.batch_size = reference_batch_size(options);
  whole_plan.choices.assign(options.probe.operators(), OperatorChoice::whole(Mode::dp));
  Plan sliced_plan = whole_plan;
  sliced_plan.choices.assign(options.probe.operators(), OperatorChoice{Mode::dp, k, 0});
  sliced_plan.choices[0] = OperatorChoice::whole(Mode::dp);
  const auto time_plan = [&](const Plan& plan) {
    return time_operators(comm, solo, options.probe, options.repetitions, setup, workload, plan);
  };
  struct KindRounds {
    double extra_calls = 0;
    std::vector<PairedTimes> forward, backward;
  };
  std::map<std::string, KindRounds> rounds_by_kind;
  for (int round = 0; round < std::max(1, options.compute_rounds); ++round) {
    std::map<std::string, OperatorPoint> whole, sliced;
    if (round % 2 == 0) {
      whole = time_plan(whole_plan);
      sliced = time_plan(sliced_plan);
    } else {
      sliced = time_plan(sliced_plan);
      whole = time_plan(whole_plan);
    }
    for (const auto& [kind, sliced_point] : sliced) {
      if (kind == "embedding") continue;
      const OperatorPoint& whole_point = whole.at(kind);
      KindRounds& rounds = rounds_by_kind[kind];
      rounds.extra_calls = static_cast<double>(k - 1) * whole_point.calls;
      rounds.forward.push_back({whole_point.forward_s, sliced_point.forward_s});
      rounds.backward.push_back({whole_point.backward_s, sliced_point.backward_s});
    }
  }
  for (const auto& [kind, rounds] : rounds_by_kind) {
    slicing.push_back({kind, k, whole_plan.batch_size,
                       extra_per_call_s(rounds.forward, rounds.extra_calls),
                       extra_per_call_s(rounds.backward, rounds.extra_calls)});
  }
  return slicing;
}

// The optimizer update: a data-parallel run over the real communicator, whose gradient
// all-reduces line the ranks up so that they update at the same time, as in training (each
// alone took 14.5 ms for the probe here; all at once, sharing the memory bus, 22 to 29 ms).
// The step's own time excludes its waits for the reductions.
double measure_optimizer_bandwidth(Communicator& comm, const CalibrationOptions& options,
                                   const ProbeSetup& setup, const Workload& workload) {
  Plan plan;
  plan.batch_size = options.batch_sizes.front();
  plan.choices.assign(options.probe.operators(), OperatorChoice::whole(Mode::dp));
  std::vector<double> update_s;
  for (const StepMetrics& step :
       train_probe(comm, options, setup, plan, options.repetitions).steps) {
    update_s.push_back(step.optimizer_step_s);
  }
  return from_rank0(comm, 2.0 * workload.model_state_bytes() / median_of(update_s));
}

// Memory bandwidth: a large copy reads and writes every byte.
double measure_memory_bandwidth(Communicator& comm, const CalibrationOptions& options,
                                const ProbeSetup& setup) {
  const at::Tensor source = at::ones({16 << 20}, setup.float_options());
  at::Tensor target = at::empty_like(source);
  std::vector<double> times;
  for (int r = 0; r < options.repetitions; ++r) {
    setup.synchronize();
    const auto start = Clock::now();
    target.copy_(source);
    setup.synchronize();
    times.push_back(seconds_since(start));
  }
  return from_rank0(comm, 2.0 * source.nbytes() / median_of(times));
}

// Per-kernel cost: a tiny operation, dominated by dispatch.
double measure_kernel_launch(Communicator& comm, const ProbeSetup& setup) {
  at::Tensor a = at::ones({1}, setup.float_options());
  const at::Tensor b = at::ones({1}, setup.float_options());
  const int count = 20000;
  setup.synchronize();
  const auto start = Clock::now();
  for (int r = 0; r < count; ++r) a.add_(b);
  setup.synchronize();
  return from_rank0(comm, seconds_since(start) / count);
}

// The main probe's compute at the middle batch size, from the medians the laws were fitted on:
// what `osdp validate` times again to see how far the machine's speed has moved since.
std::optional<SpeedReference> speed_reference(const std::vector<OperatorPoint>& points,
                                              const CalibrationOptions& options) {
  const GptShape& probe = options.probe;
  if (probe.attention != AttentionKernel::standard)
    return std::nullopt;  // runtime's probes: standard
  SpeedReference reference{probe_shape_of(probe), reference_batch_size(options), 0.0};
  const std::string label = probe_label(probe);
  for (const OperatorPoint& point : points) {
    if (point.probe == label && point.batch_size == reference.batch_size) {
      reference.compute_s += point.forward_s + point.backward_s;
    }
  }
  if (reference.compute_s <= 0) return std::nullopt;
  return reference;
}

// Each collective's alpha-beta fitted to its points' ring steps.
GroupTiming fit_group_timing(const std::vector<CollectivePoint>& measured) {
  GroupTiming group;
  for (CollectiveKind kind :
       {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}) {
    std::vector<std::pair<double, double>> points;
    for (const auto& point : measured) {
      if (point.kind == kind) points.emplace_back(point.step_bytes, point.step_time_s);
    }
    CollectiveTiming timing;
    timing.alpha_beta = fit_alpha_beta(points);
    switch (kind) {
      case CollectiveKind::all_gather:
        group.all_gather = timing;
        break;
      case CollectiveKind::reduce_scatter:
        group.reduce_scatter = timing;
        break;
      case CollectiveKind::all_reduce:
        group.all_reduce = timing;
        break;
    }
  }
  return group;
}

// The cluster from the standalone figures (collectives alone, compute laws, bandwidths).
Cluster standalone_cluster(const CalibrationResult& result, const CalibrationOptions& options,
                           const ProbeSetup& setup) {
  Cluster cluster;
  const int n = result.ranks;
  cluster.name = options.cluster_name;
  cluster.ranks = n;
  cluster.gpus_per_node = n;
  cluster.gpu.name = "cpu rank (1 thread)";
  const double memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  cluster.gpu.memory_bytes = memory_bytes / std::max(n, 1);
  if (setup.device != nullptr) {
    cluster.gpu.name = setup.device->name();
    cluster.gpu.memory_bytes = setup.device->memory_capacity_bytes();
  }
  cluster.gpu.compute_flops_per_s = result.compute_flops_per_s;
  cluster.gpu.memory_bandwidth_Bps = result.memory_bandwidth_Bps;
  cluster.gpu.optimizer_bandwidth_Bps = result.optimizer_bandwidth_Bps;
  cluster.gpu.kernel_launch_s = result.kernel_launch_s;
  cluster = refit_operator_compute(std::move(cluster), result);
  // Ranks meet at every collective, so a step goes at the pace of the slowest rank's compute:
  // the jitter between ranks computing at once, measured with no collective among them.
  cluster.gpu.straggler_slowdown = result.compute_straggler_slowdown;
  cluster.gpu.speed_reference = speed_reference(result.operators, options);
  cluster.world = fit_group_timing(result.collectives);
  if (!result.pair_collectives.empty()) {
    cluster.timing_by_group_size[2] = fit_group_timing(result.pair_collectives);
  }
  cluster.intra_node = cluster.world;
  cluster.inter_node = cluster.world;
  // The ranks are processes on this machine's cores: how compute and communication slow each
  // other down follows from sharing them (sim/executor, the cost model), not from a factor. A
  // GPU computes on its own.
  if (setup.device == nullptr) cluster.host_cores = HostCores{usable_cores(), scheduler_tick_s()};
  // More ranks than cores: the straggling was measured with every rank computing at once, two
  // or more a core, but in a step a rank that waits at a collective or for its pipeline
  // neighbour gives its core to the others, so the slowest catches up; the laws, timed with all
  // of them sharing the cores, already hold that sharing. Applied as measured, 4 ranks on 2
  // cores (1.28x) timed every layout of local-cpu-3d-4ranks 21-31 % slow; without, 5-22 %.
  // What remains is the whole step's: ranks that meet only at its end wait for the slowest one's
  // step (the 3D model, model/parallel_iteration).
  if (cluster.host_cores && n > cluster.host_cores->cores) {
    cluster.gpu.straggler_slowdown = 1.0;
    cluster.host_cores->step_straggling = result.step_straggling;
  }
  return cluster;
}

// The collectives as a training step runs them: operators in turn ZDP, DP and ZDP in slices
// (gathers, reduce-scatters and all-reduces of several sizes beside compute). Reports the
// contention, overlap and straggler figures a step shows; they are not applied to the cluster,
// whose shared cores make them (they were, and moved the predictions by tens of percent from
// one calibration to the next).
void measure_in_training(Communicator& comm, const CalibrationOptions& options,
                         const ProbeSetup& setup, const Workload& workload,
                         CalibrationResult& result) {
  const Cluster& cluster = result.cluster;
  Plan plan;
  plan.batch_size = reference_batch_size(options);
  const int k = probe_slices(options.probe);
  for (int i = 0; i < options.probe.operators(); ++i) {
    const bool sliced = i % 3 == 2 && i > 0 && k > 1;  // the embedding cannot be split
    plan.choices.push_back(sliced ? OperatorChoice{Mode::zdp, k, k}
                                  : OperatorChoice::whole(i % 3 == 1 ? Mode::dp : Mode::zdp));
  }
  const CostModel laws(workload, cluster, Training{}, {});
  std::vector<ContentionBySize> contentions;
  std::vector<double> overlaps;
  std::vector<double> stragglers;
  for (int probe = 0; probe < std::max(1, options.training_probes); ++probe) {
    const ProbeRun run = train_probe(comm, options, setup, plan, 6 * options.repetitions);
    contentions.push_back(collective_contention(comm, run.collectives, cluster.world));
    overlaps.push_back(overlap_slowdown_in_training(comm, run, laws, plan.batch_size));
    stragglers.push_back(straggler_slowdown(comm, run));
    result.in_training_runs.push_back(
        {contentions.back().overall, overlaps.back(), stragglers.back()});
  }
  result.collective_contention = median_contention(contentions);
  result.overlap_slowdown = median_of(overlaps);
  result.straggler_slowdown = median_of(stragglers);
}

}  // namespace

std::string probe_label(const GptShape& shape) {
  return fmt::format("{} x {}, s {}, v {}", shape.layers, shape.hidden, shape.sequence_length,
                     shape.vocabulary);
}

CalibrationResult calibrate(Communicator& comm, const CalibrationOptions& options) {
  const bool on_gpu = options.device == DeviceKind::cuda;
  // A CPU rank computes on one thread (as in validate); a GPU rank's threads only launch.
  if (!on_gpu) use_one_compute_thread();
  if (on_gpu && comm.size() != 1) {
    throw InputError("command line", "--ranks", std::to_string(comm.size()),
                     "1 with --device cuda (one GPU: its compute; osdp_nccl_probe measures the "
                     "collectives between GPUs)");
  }
  CalibrationResult result;
  result.ranks = comm.size();
  // One rank runs no collective: nothing to time (the cluster's timings stay zero, unused).
  if (!on_gpu) result.collectives = time_collectives(comm, options);
  // Pairs of neighbouring ranks, as a tensor-parallel layout groups them (tensor innermost),
  // every pair at once: the 3D model costs a pair's collectives with these, not the world's
  // (on 4 ranks sharing 2 cores the two came out alike: a step is a thread's wake-up).
  const int n = comm.size();
  if (!on_gpu && n >= 4 && n % 2 == 0) {
    const int first = comm.rank() - comm.rank() % 2;
    result.pair_collectives = time_collectives(comm, options, {first, first + 1});
  }
  const std::unique_ptr<RankDevice> device =
      on_gpu ? make_rank_device(DeviceKind::cuda, comm.rank()) : nullptr;
  const ProbeSetup setup{initial_gpt_parameters(options.probe, 1), device.get()};
  // The blocking sync's steps, a third of them now, a third midway and a third at the end.
  std::vector<double> sync_step_wait_s;
  const auto time_sync_block = [&](int block) {
    if (on_gpu) return;
    const int steps = options.blocking_sync_steps / 3 + (block < options.blocking_sync_steps % 3);
    const std::vector<double> waits = time_blocking_sync_steps(
        comm, options.probe, setup.initial, reference_batch_size(options), steps);
    sync_step_wait_s.insert(sync_step_wait_s.end(), waits.begin(), waits.end());
  };
  time_sync_block(0);
  const std::unique_ptr<Communicator> solo = connect_solo(options.timeout);
  const Workload workload = make_gpt(options.probe.spec(), Training{});
  std::vector<ComputeProbe> probes{{options.probe, setup, workload}};
  for (const GptShape& shape : options.extra_compute_probes) {
    probes.push_back({shape, ProbeSetup{initial_gpt_parameters(shape, 1), device.get()},
                      make_gpt(shape.spec(), Training{})});
  }
  measure_compute(comm, *solo, options, probes, result);
  time_sync_block(1);
  result.slicing = measure_slicing(comm, *solo, options, setup, workload);
  result.optimizer_bandwidth_Bps = measure_optimizer_bandwidth(comm, options, setup, workload);
  result.memory_bandwidth_Bps = measure_memory_bandwidth(comm, options, setup);
  result.kernel_launch_s = measure_kernel_launch(comm, setup);
  result.cluster = standalone_cluster(result, options, setup);
  // The in-training figures are those of collectives beside compute: none on one GPU.
  if (!on_gpu) {
    measure_in_training(comm, options, setup, workload, result);
    time_sync_block(2);
    result.blocking_sync = blocking_sync_figures(options.probe, reference_batch_size(options),
                                                 std::move(sync_step_wait_s), result.cluster);
    result.cluster.gpu.blocking_sync_s = result.blocking_sync.per_sync_s;
  }
  return result;
}

std::vector<OperatorPoint> time_compute_by_kind(Communicator& comm, const GptShape& shape,
                                                int batch, int repetitions) {
  CalibrationOptions options;
  options.probe = shape;
  options.repetitions = repetitions;
  const std::unique_ptr<Communicator> solo = connect_solo(options.timeout);
  const Workload workload = make_gpt(shape.spec(), Training{});
  const ProbeSetup setup{initial_gpt_parameters(shape, 1), nullptr};
  Plan plan;
  plan.batch_size = batch;
  plan.choices.assign(workload.size(), OperatorChoice::whole(Mode::dp));
  std::vector<OperatorPoint> points;
  for (auto& [kind, point] :
       time_operators(comm, *solo, shape, options.repetitions, setup, workload, plan)) {
    points.push_back(point);
  }
  return points;
}

std::optional<CalibrationResult> run_calibration(int local_ranks,
                                                 const CalibrationOptions& options) {
  if (const auto environment = rank_from_environment()) {
    try {
      auto communicator =
          Communicator::connect(launched_rank_connection(*environment, options.timeout));
      let_communication_preempt_compute();
      CalibrationResult result = calibrate(*communicator, options);
      if (environment->rank != 0) return std::nullopt;
      return result;
    } catch (const CollectiveError& error) {
      throw RunFailure(error.what());
    }
  }
  const fs::path directory =
      fs::temp_directory_path() /
      fmt::format("osdp-calibrate-{}-{}", ::getpid(), std::random_device()());
  fs::create_directories(directory);
  const std::string output = (directory / "calibration.json").string();
  const LaunchResult launched = launch_local_ranks(
      local_ranks,
      [&](int rank) {
        auto communicator = Communicator::connect(local_rank_connection(
            rank, local_ranks, (directory / "store").string(), options.timeout));
        let_communication_preempt_compute();
        const CalibrationResult result = calibrate(*communicator, options);
        if (rank == 0) {
          write_file_atomically(output, Json{{"report", calibration_report_json(result)},
                                             {"cluster", cluster_to_json(result.cluster)}}
                                            .dump());
        }
        return 0;
      },
      std::chrono::seconds(5));
  std::optional<CalibrationResult> result;
  if (launched.ok) {
    const Json document = read_json_file(output);
    CalibrationResult parsed = calibration_result_from_report(document.at("report"));
    parsed.cluster = load_cluster(JsonReader(document.at("cluster"), output, "$.cluster"));
    result = parsed;
  }
  remove_directory_tree(directory);
  throw_if_failed(launched, "calibration");
  return result;
}

}  // namespace osdp::validate
