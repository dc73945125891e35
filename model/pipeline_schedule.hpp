// Pipeline-parallel schedules and their timeline: which forward and backward passes each stage
// runs, in which order, and when each can start. The timeline is an event simulation of the
// schedule (a pass starts when its stage is free and its input has arrived), so the bubble, the
// micro-batches each stage holds and the critical path come out of it rather than from a closed
// form; the closed forms hold where their assumptions do (equal stages, free transfers), and the
// tests check them there.
//
//   gpipe        every forward, then every backward: each stage holds all m micro-batches
//   1f1b         (PipeDream-Flush, Megatron's default) stage r runs p - r - 1 forwards, then
//                alternates one forward and one backward: it holds at most p - r micro-batches
//   interleaved  Megatron's interleaved 1F1B: each stage holds v model chunks (chunk k of stage
//                r is virtual stage k p + r); bubble (p - 1) / (v m) of an iteration with equal
//                stages, v times the transfers. Needs m a multiple of p.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace osdp {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved };
std::string_view pipeline_schedule_name(PipelineSchedule schedule);
std::optional<PipelineSchedule> pipeline_schedule_from_name(std::string_view name);

enum class Pass { forward, backward };

// The work of one iteration's pipeline. Chunks are virtual stages in model order (stages x
// chunks_per_stage of them); chunk c runs on stage c mod stages.
struct PipelineWork {
  int stages = 1;
  int chunks_per_stage = 1;        // v (1 unless interleaved)
  int micro_batches = 1;           // m
  std::vector<double> forward_s;   // per chunk, one micro-batch
  std::vector<double> backward_s;  // per chunk, one micro-batch (recompute included)
  // Per boundary between chunk c and c + 1 (chunks - 1 of them): the activation's transfer
  // forward and its gradient's backward, each a delay between the two stages.
  std::vector<double> transfer_s;
  // Blocking transfers: a pass's stage stays busy until its output has reached the next stage
  // (the transfer counts in the pass's time, and the receiver may start as soon as it ends), as
  // blocking send/recv pairs behave. Otherwise a transfer is a delay off both stages' streams.
  bool blocking_transfers = false;
  // Per stage (empty: all 0), the earliest its first pass may start: what it gathers before the
  // first micro-batch (parameters kept whole across micro-batches, z2) delays it.
  std::vector<double> stage_ready_s;
  // Ranks that share CPU cores (model/cluster's HostCores): while k stages are in passes at once,
  // a pass advances at rate_by_busy_stages[k - 1] times the speed its duration assumes (the
  // durations are timed with every rank busy, so the rate is 1 at k = stages and more below:
  // a stage waiting for its input leaves its cores to the others). Empty: every pass takes its
  // duration.
  std::vector<double> rate_by_busy_stages;

  int chunks() const { return stages * chunks_per_stage; }
};

struct PipelineStep {
  int chunk = 0;
  int micro_batch = 0;
  Pass pass = Pass::forward;
};

// The order in which stage `stage` runs its passes under the schedule (2 m v passes), each
// pass computed when asked for: the layout search walks the orders of thousands of layouts of
// up to millions of passes, and building them (and faulting their pages in) took a third of
// its time.
// The constructor throws std::invalid_argument when the schedule cannot run this shape
// (interleaved with m not a multiple of p, or a stage outside the pipeline).
class StageOrder {
 public:
  StageOrder(PipelineSchedule schedule, int stages, int chunks_per_stage, int micro_batches,
             int stage);
  int size() const { return 2 * micro_batches_ * chunks_per_stage_; }
  // The pass at `index`, 0 <= index < size().
  PipelineStep operator[](int index) const;

 private:
  PipelineStep step_of(int k, Pass pass) const;  // the stage's k-th forward or backward

  PipelineSchedule schedule_;
  int stages_;
  int chunks_per_stage_;
  int micro_batches_;
  int stage_;
  int warmup_ = 0;  // forwards before the first backward (GPipe: all of them)
};

// The same order, built (2 m v passes).
std::vector<PipelineStep> stage_order(PipelineSchedule schedule, int stages, int chunks_per_stage,
                                      int micro_batches, int stage);

struct TimedStep {
  PipelineStep step;
  double start_s = 0;
  double end_s = 0;
};

struct PipelineTimeline {
  // Each stage's passes in the order it ran them (empty under PipelineRecord::summary, as are
  // the critical path's counts).
  std::vector<std::vector<TimedStep>> stages;
  double makespan_s = 0;         // from 0 (stages' prologues) to the last end
  double first_start_s = 0;      // the first pass's start (after its prologue)
  std::vector<double> finish_s;  // per stage: the end of its last pass
  std::vector<double> busy_s;    // per stage: time spent in passes
  // Per stage: its passes' durations as PipelineWork gives them (every stage busy); more than
  // busy_s on shared cores, where a stage computes faster while others wait.
  std::vector<double> work_s;
  // Per stage: the most micro-batches (of all its chunks) whose forward ran and backward did not.
  std::vector<int> peak_in_flight;
  // The critical path: how often each chunk's forward and backward and each boundary's transfer
  // lie on the longest chain of passes and transfers that ends at the last pass. The makespan is
  // their durations' sum, so it is linear in them while the path stays the same (not on shared
  // cores, where a pass's time depends on what runs beside it).
  std::vector<int> critical_forwards;   // per chunk
  std::vector<int> critical_backwards;  // per chunk
  std::vector<int> critical_transfers;  // per boundary

  // The busiest stage's idle share of the makespan from the first pass on (the bubble as
  // measured; a wait for gathers before the first pass is not a bubble).
  double bubble_fraction() const;
};

// What run_pipeline records besides the per-stage figures (makespan, first start, finish, busy,
// peak in flight).
enum class PipelineRecord {
  passes,   // every pass (stages) and the critical path
  summary,  // the per-stage figures only (a search comparing many layouts needs no more)
};

// Runs the schedule on the work. Throws std::invalid_argument on an inconsistent work
// description.
PipelineTimeline run_pipeline(PipelineSchedule schedule, const PipelineWork& work,
                              PipelineRecord record = PipelineRecord::passes);

// The timeline as a Chrome / Perfetto trace (JSON; plots/timeline.py draws it): one process
// per stage, each pass a slice of category "forward" or "backward" with its chunk and
// micro-batch, times in microseconds; with the stages' model-state bytes and each chunk's
// activation bytes per micro-batch, a "memory" counter per stage (model_states, activations:
// the micro-batches in flight). With each stage's end of its gradient reductions, a second
// track per stage ("gradients") shows them from its last pass's end. A third ("compute waits")
// has the stage's idle time before each pass from the pipeline's first pass on (category
// "wait", named "receive": it waited for a neighbour's pass and the transfer, as the runtime's
// trace names such a wait); with the time after its last pass they add up to its bubble.
std::string pipeline_chrome_trace(const PipelineTimeline& timeline, const std::string& title,
                                  const std::vector<double>& stage_state_bytes = {},
                                  const std::vector<double>& chunk_activation_bytes = {},
                                  const std::vector<double>& stage_synchronised_s = {});

// The closed forms for equal stages and free transfers: the bubble as a share of the ideal time
// m (F + B): (p - 1) / m for GPipe and 1F1B, (p - 1) / (v m) interleaved.
double ideal_bubble_ratio(PipelineSchedule schedule, int stages, int chunks_per_stage,
                          int micro_batches);
// The micro-batches stage r holds at most (of all its chunks): m (GPipe), min(p - r, m) (1F1B),
// min(v m, 2 (p - r - 1) + (v - 1) p + 1) interleaved with v chunks a stage (Megatron's warm-up
// forwards and the first steady-state one; v m when m = p, where every forward runs first).
int ideal_in_flight(PipelineSchedule schedule, int stages, int micro_batches, int stage,
                    int chunks_per_stage = 1);

}  // namespace osdp
