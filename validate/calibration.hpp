// OSDP's profiler on this hardware: alpha/beta of each ring collective over message sizes (a
// piecewise fit, since bandwidth changes with size), compute time per operator type and batch
// size (and from it a sustained compute rate), memory bandwidth, per-kernel launch cost and the
// compute slowdown while a collective runs. The result is a cluster description that `plan`,
// `simulate` and `validate --cluster` load.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cluster.hpp"
#include "model/json_reader.hpp"
#include "model/scenario.hpp"
#include "validate/blocking_sync.hpp"
#include "validate/communicator.hpp"
#include "validate/device_kind.hpp"
#include "validate/gpt_shape.hpp"

namespace osdp::validate {

struct CalibrationOptions {
  // Full buffer sizes S of the collectives probed.
  std::vector<double> message_bytes{16e3, 64e3, 256e3, 1e6, 4e6, 16e6};
  int repetitions = 5;  // the median is kept
  // Rounds over every collective and size (each sample the mean of 4 calls as a step issues
  // them); a point is the mean of its samples. Small messages vary most and with a heavy tail
  // (wake-ups): with 15 rounds two calibrations in a row simulated ZDP in 4 slices up to 14 %
  // apart, with 90 (about 10 s more) within 2.2 %.
  int collective_rounds = 90;
  // Rounds over the batch sizes for the compute laws (repetitions spread over them); each
  // point is the median of its rounds.
  int compute_rounds = 3;
  // Probe runs of a training step (each 6 x repetitions steps); the in-training figures are
  // their medians.
  int training_probes = 3;
  // Steps of the blocking-sync probe, timed in three blocks (each after a warm-up step) at the
  // start, middle and end of the calibration; the median over all is kept. One step's wait for
  // its sums spreads 9-88 ms on the 2-core VM and the medians of its quarter-minute blocks
  // 29-51 ms: 15 steps in one block left the skew 1.1-2.7 ms a sum from one calibration to the
  // next, 60 in one block 1.4-2.1 ms.
  int blocking_sync_steps = 150;
  // The GPT whose operators are timed, sliced and trained (the in-training figures), and the
  // batch sizes. Its shape is none of the shipped CPU scenarios' models, so that a validation
  // does not test the laws on the model they were fitted on.
  GptShape probe{2, 320, 8, 128, 2048};
  // More shapes whose operators are timed at the same batch sizes: each kind's law is fitted
  // over every shape's points (narrower and wider, shorter and longer sequences, other
  // vocabularies), so that it holds for models between them rather than for one.
  std::vector<GptShape> extra_compute_probes{{2, 160, 4, 192, 1536}, {2, 448, 8, 64, 3072}};
  std::vector<int> batch_sizes{1, 2, 4, 8};
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::string cluster_name = "local-cpu (calibrated)";
  // cuda (a build with the device path; one rank): the probe's compute, the optimizer update and
  // the memory bandwidth are timed on cuda:0. One rank runs no collective, so the collectives and
  // the in-training figures are not measured.
  DeviceKind device = DeviceKind::cpu;
};

struct CollectivePoint {
  CollectiveKind kind = CollectiveKind::all_gather;
  double bytes = 0;  // S
  // As a training step issues it (after compute, from the computing thread, which waits): the
  // mean over the samples, and their first and third quartiles. The cluster's fit uses the mean.
  double time_s = 0;
  double time_q1_s = 0;
  double time_q3_s = 0;
  double step_bytes = 0;   // S / N
  double step_time_s = 0;  // time / ring steps
  double bus_bandwidth_Bps = 0;
  // Back-to-back calls (nccl-tests' way; median), for comparison: what the transport costs
  // once its threads are awake and the ranks in step.
  double back_to_back_time_s = 0;
  // CPU seconds this rank's process spent per second of the back-to-back calls (its
  // communication thread; the caller waits asleep): how much of a core the transport keeps busy.
  double cpu_fraction = 0;
  // The same calls as time_s, rank by rank: the time of the rank that came last (the shortest
  // from issue to completion; the collective's own time once every rank is in it), and how
  // much longer the first one waited (the longest less the shortest: how far apart the ranks
  // arrive). Means over the calls; time_s, rank 0's, holds part of the spread.
  double last_arrival_time_s = 0;
  double arrival_spread_s = 0;
};

struct OperatorPoint {
  std::string kind;  // embedding, attention, mlp, head
  int batch_size = 0;
  double forward_s = 0;
  double backward_s = 0;
  double flops = 0;  // forward + backward
  // The kind's calls in the probe (one per layer) and their FLOPs per sample, summed.
  double forward_flops_per_sample = 0;
  double backward_flops_per_sample = 0;
  int calls = 0;
  // Rounds the point is the median of, and their spread: (slowest - fastest) round's forward +
  // backward over the median's.
  int rounds = 1;
  double round_spread = 0;
  std::string probe;  // the probe's shape (probe_label)
  // The activation bytes the kind's calls save for backward per sample, summed (the compute
  // law's memory-bound term: Operator::activation_bytes_per_sample).
  double activation_bytes_per_sample = 0;
};

// A training step's collectives over the same collectives alone (total times), for each
// segment of the standalone fit (ring step sizes from min_step_bytes up) and overall. Reported
// (calibrate's report and table), not applied: the cluster's collective timings are the
// standalone fit's, and the shared cores account for the contention (model/cluster.hpp).
struct ContentionBySize {
  std::vector<double> min_step_bytes;
  std::vector<double> factors;
  double overall = 1;
};

// What each slice after the first adds to an operator kind's forward and backward (k slices
// against the whole operator, at one batch size).
struct SlicingPoint {
  std::string kind;
  int slices = 1;
  int batch_size = 0;
  double forward_s = 0;
  double backward_s = 0;
};

// One round of a paired measurement: the same work timed without and with a change, back to
// back, so that a drift of the machine's speed moves both alike.
struct PairedTimes {
  double without_s = 0;
  double with_s = 0;
};

// What the change adds per extra call: the median over the rounds of (with - without), divided
// by the extra calls it makes, never below zero. The slicing probe's `extra_slice`.
double extra_per_call_s(const std::vector<PairedTimes>& rounds, double extra_calls);

struct CalibrationResult {
  int ranks = 1;
  std::vector<CollectivePoint> collectives;
  // With 4 or more ranks (an even count): the same collectives over pairs of neighbouring
  // ranks, every pair at once (a tensor-parallel pair's sums; the cluster's group-of-2 timings).
  std::vector<CollectivePoint> pair_collectives;
  std::vector<OperatorPoint> operators;
  std::vector<SlicingPoint> slicing;
  double compute_flops_per_s = 0;
  double memory_bandwidth_Bps = 0;
  double optimizer_bandwidth_Bps = 0;  // 2 x state bytes / the runtime's own update time
  double kernel_launch_s = 0;
  double overlap_slowdown = 1;
  double straggler_slowdown = 1;  // the slowest rank's compute over the mean, in training
  // The slowest rank's compute over the mean while every rank computes the compute laws' runs
  // at once, with no collective among them (median over the runs; each run's figure): the
  // cluster's straggler_slowdown.
  double compute_straggler_slowdown = 1;
  std::vector<double> compute_straggling_runs;
  // The slowest rank's compute of a whole step over the mean in the same runs (median over the
  // steps, then over the runs): with more ranks than cores, the host cores' step_straggling.
  double step_straggling = 1;
  std::vector<double> step_straggling_runs;
  ContentionBySize collective_contention;
  // The in-training figures are medians over several probe runs (a noisy machine moves one
  // run's figures by tens of percent); each run's figures, in the order run, for their spread.
  struct InTrainingRun {
    double collective_contention = 1;  // overall
    double overlap_slowdown = 1;
    double straggler_slowdown = 1;
  };
  std::vector<InTrainingRun> in_training_runs;
  // The ranks' arrival skew at tensor-parallel sums (CPU ranks, 2 or more): the cluster's
  // blocking_sync_s.
  BlockingSyncFigures blocking_sync;
  Cluster cluster;  // what the figures above make
};

// A probe's shape in a table: "2 x 320, s 128, v 2048" (layers x hidden, sequence, vocabulary).
std::string probe_label(const GptShape& shape);

// Every rank runs this (the same collectives in the same order); the figures are rank 0's.
CalibrationResult calibrate(Communicator& communicator, const CalibrationOptions& options);

// Local ranks forked here, or this process as one rank under torchrun-style variables; returns
// the result on the reporting process (nullopt on other ranks). Throws RunFailure (see
// rank_runner.hpp) naming failed ranks.
std::optional<CalibrationResult> run_calibration(int local_ranks,
                                                 const CalibrationOptions& options);

// Forward and backward compute of every operator of `shape` at `batch` rows per rank, summed by
// operator kind (medians of `repetitions` steps after a warm-up): every rank computes at once,
// each on a communicator of its own, so no collective runs beside it. Collective over `comm`.
std::vector<OperatorPoint> time_compute_by_kind(Communicator& comm, const GptShape& shape,
                                                int batch, int repetitions);

// Each operator kind's compute law (fixed part per call, marginal FLOP rate), forward and
// backward, fitted over the batch sizes and probe shapes timed.
std::map<std::string, OperatorCompute, std::less<>> fit_operator_compute(
    const std::vector<OperatorPoint>& points);
// `kept` (a calibrated cluster) with the compute laws of the operator kinds a calibration timed
// fitted again by this build on its timings and slicing points (its report,
// calibration_report.hpp); the rest of the cluster, other kinds' laws included, as kept. A change
// to the law fit is scored on kept calibrations this way, with nothing measured again.
Cluster refit_operator_compute(Cluster kept, const CalibrationResult& measured);
// What a kind's law gives for one point's forward and backward (seconds, summed).
double operator_law_s(const OperatorCompute& law, const OperatorPoint& point);

}  // namespace osdp::validate
