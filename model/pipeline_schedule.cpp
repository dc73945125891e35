#include "model/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "model/chrome_trace.hpp"

namespace osdp {

std::string_view pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::gpipe:
      return "gpipe";
    case PipelineSchedule::one_f_one_b:
      return "1f1b";
    case PipelineSchedule::interleaved:
      return "interleaved";
  }
  return "?";
}

std::optional<PipelineSchedule> pipeline_schedule_from_name(std::string_view name) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    if (pipeline_schedule_name(schedule) == name) return schedule;
  }
  return std::nullopt;
}

namespace {

void check_shape(int stages, int chunks_per_stage, int micro_batches) {
  if (stages < 1 || chunks_per_stage < 1 || micro_batches < 1) {
    throw std::invalid_argument(
        fmt::format("a pipeline needs at least one stage, chunk and micro-batch (got {}, {}, {})",
                    stages, chunks_per_stage, micro_batches));
  }
  // Passes are counted and indexed in int: every chunk's forward and backward of every
  // micro-batch must fit.
  const double passes = 2.0 * stages * chunks_per_stage * micro_batches;
  if (passes > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(fmt::format(
        "a pipeline of {} stages x {} chunks x {} micro-batches is {:.3g} passes, more than {}",
        stages, chunks_per_stage, micro_batches, passes, std::numeric_limits<int>::max()));
  }
}

// Megatron's interleaved schedule: the k-th forward (or backward) a stage runs belongs to model
// chunk (k mod p v) / p (backwards count the chunks down) and micro-batch (k / p v) p + k mod p.
PipelineStep interleaved_step(int k, int stages, int chunks_per_stage, int stage, Pass pass) {
  const int group = stages * chunks_per_stage;
  int chunk_in_stage = (k % group) / stages;
  if (pass == Pass::backward) chunk_in_stage = chunks_per_stage - 1 - chunk_in_stage;
  const int micro_batch = (k / group) * stages + k % stages;
  return {chunk_in_stage * stages + stage, micro_batch, pass};
}

}  // namespace

StageOrder::StageOrder(PipelineSchedule schedule, int stages, int chunks_per_stage,
                       int micro_batches, int stage)
    : schedule_(schedule),
      stages_(stages),
      chunks_per_stage_(chunks_per_stage),
      micro_batches_(micro_batches),
      stage_(stage) {
  check_shape(stages, chunks_per_stage, micro_batches);
  if (stage < 0 || stage >= stages) {
    throw std::invalid_argument(fmt::format("stage {} outside 0..{}", stage, stages - 1));
  }
  const int m = micro_batches;
  switch (schedule) {
    case PipelineSchedule::gpipe:
    case PipelineSchedule::one_f_one_b:
      if (chunks_per_stage != 1) {
        throw std::invalid_argument(fmt::format("{} runs one model chunk per stage (got {})",
                                                pipeline_schedule_name(schedule),
                                                chunks_per_stage));
      }
      warmup_ = schedule == PipelineSchedule::gpipe ? m : std::min(stages - stage - 1, m);
      break;
    case PipelineSchedule::interleaved: {
      if (m % stages != 0) {
        throw std::invalid_argument(fmt::format(
            "the interleaved schedule needs the micro-batches ({}) to be a multiple of the "
            "stages ({})",
            m, stages));
      }
      const int total = m * chunks_per_stage;
      warmup_ = m == stages
                    ? total
                    : std::min(total, (stages - stage - 1) * 2 + (chunks_per_stage - 1) * stages);
      break;
    }
  }
}

PipelineStep StageOrder::step_of(int k, Pass pass) const {
  if (schedule_ == PipelineSchedule::interleaved) {
    return interleaved_step(k, stages_, chunks_per_stage_, stage_, pass);
  }
  return {stage_, k, pass};
}

// Every schedule runs `warmup` forwards, then forwards and backwards by turns while forwards are
// left, then the remaining backwards (GPipe: all forwards first, its warmup is every one).
PipelineStep StageOrder::operator[](int index) const {
  assert(index >= 0 && index < size());
  const int total = micro_batches_ * chunks_per_stage_;
  if (index < warmup_) return step_of(index, Pass::forward);
  const int steady = 2 * (total - warmup_);
  if (index < warmup_ + steady) {
    const int turn = (index - warmup_) / 2;
    return (index - warmup_) % 2 == 0 ? step_of(warmup_ + turn, Pass::forward)
                                      : step_of(turn, Pass::backward);
  }
  return step_of(index - total, Pass::backward);
}

std::vector<PipelineStep> stage_order(PipelineSchedule schedule, int stages, int chunks_per_stage,
                                      int micro_batches, int stage) {
  const StageOrder order(schedule, stages, chunks_per_stage, micro_batches, stage);
  std::vector<PipelineStep> steps(static_cast<std::size_t>(order.size()));
  for (int k = 0; k < order.size(); ++k) steps[k] = order[k];
  return steps;
}

double PipelineTimeline::bubble_fraction() const {
  const double span_s = makespan_s - first_start_s;
  if (span_s <= 0 || busy_s.empty()) return 0.0;
  // At least 0: a stage busy the whole span gives 1 - 1 with rounding (printed "-0.0 %").
  return std::max(0.0, 1.0 - *std::max_element(busy_s.begin(), busy_s.end()) / span_s);
}

namespace {

// Where a pass's start came from: the pass before it on its stage, or its input (the pass of
// the neighbouring chunk, plus the transfer between them).
enum class Binding { none, stage, input };

struct StepState {
  double end_s = -1;  // < 0: not run yet
  Binding binding = Binding::none;
  int previous_on_stage = -1;  // index into that stage's order
};

}  // namespace

PipelineTimeline run_pipeline(PipelineSchedule schedule, const PipelineWork& work,
                              PipelineRecord record) {
  const bool passes = record == PipelineRecord::passes;
  const int p = work.stages;
  const int v = work.chunks_per_stage;
  const int m = work.micro_batches;
  check_shape(p, v, m);
  const int chunks = work.chunks();
  if (static_cast<int>(work.forward_s.size()) != chunks ||
      static_cast<int>(work.backward_s.size()) != chunks ||
      static_cast<int>(work.transfer_s.size()) != chunks - 1) {
    throw std::invalid_argument(fmt::format(
        "pipeline work of {} chunks needs {} forward and backward times and {} transfers", chunks,
        chunks, chunks - 1));
  }

  std::vector<StageOrder> orders;
  for (int stage = 0; stage < p; ++stage) orders.emplace_back(schedule, p, v, m, stage);
  // Each stage's next pass, worked out once (a stage is often looked at before its input is in).
  std::vector<PipelineStep> upcoming;
  for (const StageOrder& order : orders) upcoming.push_back(order[0]);

  // End time of each (chunk, micro-batch, pass), and which stage slot holds it.
  auto key = [&](int chunk, int micro_batch, Pass pass) {
    return (chunk * m + micro_batch) * 2 + (pass == Pass::backward ? 1 : 0);
  };
  std::vector<double> end_of(static_cast<std::size_t>(chunks) * m * 2, -1.0);
  std::vector<std::pair<int, int>> slot_of(passes ? end_of.size() : 0, {-1, -1});

  PipelineTimeline timeline;
  timeline.stages.resize(p);
  timeline.finish_s.assign(p, 0.0);
  // A stage is free from when it is ready (its first pass may start no earlier).
  for (int stage = 0; stage < p && stage < static_cast<int>(work.stage_ready_s.size()); ++stage) {
    timeline.finish_s[stage] = work.stage_ready_s[stage];
  }
  timeline.busy_s.assign(p, 0.0);
  timeline.work_s.assign(p, 0.0);
  timeline.peak_in_flight.assign(p, 0);
  std::vector<std::vector<Binding>> bindings(p);
  std::vector<int> next(p, 0);
  std::vector<int> in_flight(p, 0);
  const int total_passes = 2 * m * v;
  for (int stage = 0; stage < p && passes; ++stage) {
    timeline.stages[stage].reserve(total_passes);
    bindings[stage].reserve(total_passes);
  }
  std::vector<double> first_start_s(p, -1.0);

  // The input a pass waits for: its end time (< 0: not yet run) and the transfer after it.
  const bool blocking = work.blocking_transfers;
  auto input_of = [&](const PipelineStep& step) -> std::pair<double, double> {
    if (step.pass == Pass::forward) {
      if (step.chunk == 0) return {0.0, 0.0};
      return {end_of[key(step.chunk - 1, step.micro_batch, Pass::forward)],
              blocking ? 0.0 : work.transfer_s[step.chunk - 1]};
    }
    if (step.chunk == chunks - 1) {
      return {end_of[key(step.chunk, step.micro_batch, Pass::forward)], 0.0};
    }
    return {end_of[key(step.chunk + 1, step.micro_batch, Pass::backward)],
            blocking ? 0.0 : work.transfer_s[step.chunk]};
  };
  // The boundary a pass's output crosses (-1: none): forward to the next chunk, backward to the
  // previous one.
  auto outgoing_boundary = [&](const PipelineStep& step) {
    if (step.pass == Pass::forward) return step.chunk + 1 < chunks ? step.chunk : -1;
    return step.chunk > 0 ? step.chunk - 1 : -1;
  };

  const auto duration_of = [&](const PipelineStep& step) {
    double duration =
        step.pass == Pass::forward ? work.forward_s[step.chunk] : work.backward_s[step.chunk];
    if (blocking && outgoing_boundary(step) >= 0)
      duration += work.transfer_s[outgoing_boundary(step)];
    return duration;
  };
  // A pass ran on `stage` from start_s to end_s; ready_s: when its input was in, free_s: when
  // its stage was.
  const auto complete = [&](int stage, const PipelineStep& step, double start_s, double end_s,
                            double ready_s, double free_s) {
    end_of[key(step.chunk, step.micro_batch, step.pass)] = end_s;
    if (next[stage] == 0) first_start_s[stage] = start_s;
    if (passes) {
      Binding binding = Binding::none;
      if (next[stage] > 0 && free_s >= ready_s) {
        binding = Binding::stage;
      } else if (!(step.pass == Pass::forward && step.chunk == 0)) {
        binding = Binding::input;
      }
      slot_of[key(step.chunk, step.micro_batch, step.pass)] = {stage, next[stage]};
      timeline.stages[stage].push_back({step, start_s, end_s});
      bindings[stage].push_back(binding);
    }
    timeline.finish_s[stage] = end_s;
    timeline.busy_s[stage] += end_s - start_s;
    timeline.work_s[stage] += duration_of(step);
    in_flight[stage] += step.pass == Pass::forward ? 1 : -1;
    timeline.peak_in_flight[stage] = std::max(timeline.peak_in_flight[stage], in_flight[stage]);
    if (++next[stage] < orders[stage].size()) upcoming[stage] = orders[stage][next[stage]];
  };
  const auto deadlocked = [&](int remaining) {
    return std::logic_error(fmt::format("pipeline schedule {} deadlocked ({} passes left)",
                                        pipeline_schedule_name(schedule), remaining));
  };

  int remaining = p * total_passes;
  const bool shared_cores =
      std::any_of(work.rate_by_busy_stages.begin(), work.rate_by_busy_stages.end(),
                  [](double rate) { return rate != 1.0; });
  if (!shared_cores) {
    // Each stage runs its passes as soon as their inputs are in: a pass's times follow from the
    // passes before it alone, so the order in which stages are visited does not change them. A
    // stage is visited again only when a pass that feeds it has ended (a sweep over every stage
    // until none moves costs stages x passes on deep pipelines).
    std::vector<int> to_visit(p);
    std::iota(to_visit.begin(), to_visit.end(), 0);
    std::vector<char> queued(p, 1);
    while (!to_visit.empty()) {
      const int stage = to_visit.back();
      to_visit.pop_back();
      queued[stage] = 0;
      while (next[stage] < total_passes) {
        const PipelineStep step = upcoming[stage];
        const auto [input_end, transfer] = input_of(step);
        if (input_end < 0) break;
        const double ready_s = input_end + transfer;
        const double free_s = timeline.finish_s[stage];
        const double start_s = std::max(ready_s, free_s);
        complete(stage, step, start_s, start_s + duration_of(step), ready_s, free_s);
        --remaining;
        // The last chunk's forward feeds its own backward, the first chunk's backward nothing.
        if (outgoing_boundary(step) < 0) continue;
        const int fed = (step.pass == Pass::forward ? step.chunk + 1 : step.chunk - 1) % p;
        if (!queued[fed]) {
          queued[fed] = 1;
          to_visit.push_back(fed);
        }
      }
    }
    if (remaining > 0) throw deadlocked(remaining);
  } else {
    // On shared cores a pass's speed depends on how many stages compute beside it: advance all
    // stages together in time, from one pass's start or end to the next.
    struct Running {
      bool active = false;
      PipelineStep step;
      double start_s = 0, ready_s = 0, free_s = 0;
      double duration_s = 0;   // at the rate of all stages busy
      double work_left_s = 0;  // of it
    };
    std::vector<Running> running(p);
    const auto rate_of = [&](int busy) {
      const auto& rates = work.rate_by_busy_stages;
      return rates[std::min<std::size_t>(busy, rates.size()) - 1];
    };
    double now_s = 0;
    while (remaining > 0) {
      double next_start_s = std::numeric_limits<double>::infinity();
      int busy = 0;
      for (int stage = 0; stage < p; ++stage) {
        Running& pass = running[stage];
        if (!pass.active && next[stage] < total_passes) {
          const PipelineStep step = upcoming[stage];
          const auto [input_end, transfer] = input_of(step);
          if (input_end >= 0) {
            const double ready_s = input_end + transfer;
            const double free_s = timeline.finish_s[stage];
            const double start_s = std::max(ready_s, free_s);
            if (start_s <= now_s) {
              const double duration_s = duration_of(step);
              pass = {true, step, start_s, ready_s, free_s, duration_s, duration_s};
            } else {
              next_start_s = std::min(next_start_s, start_s);
            }
          }
        }
        busy += pass.active;
      }
      if (busy == 0) {
        if (!std::isfinite(next_start_s)) throw deadlocked(remaining);
        now_s = next_start_s;
        continue;
      }
      const double rate = rate_of(busy);
      int first_done = -1;
      for (int stage = 0; stage < p; ++stage) {
        if (running[stage].active &&
            (first_done < 0 || running[stage].work_left_s < running[first_done].work_left_s)) {
          first_done = stage;
        }
      }
      const double until_end_s = running[first_done].work_left_s / rate;
      const bool first_ends = until_end_s <= next_start_s - now_s;
      const double step_s = first_ends ? until_end_s : next_start_s - now_s;
      now_s += step_s;
      for (int stage = 0; stage < p; ++stage) {
        Running& pass = running[stage];
        if (!pass.active) continue;
        pass.work_left_s -= step_s * rate;
        // Passes that end with the first one to within rounding end now.
        if (stage == first_done && first_ends) pass.work_left_s = 0;
        if (pass.work_left_s > 1e-12 * pass.duration_s) continue;
        pass.active = false;
        complete(stage, pass.step, pass.start_s, now_s, pass.ready_s, pass.free_s);
        --remaining;
      }
    }
  }
  timeline.makespan_s = *std::max_element(timeline.finish_s.begin(), timeline.finish_s.end());
  timeline.first_start_s = timeline.makespan_s;
  for (double start_s : first_start_s) {
    if (start_s >= 0) timeline.first_start_s = std::min(timeline.first_start_s, start_s);
  }
  if (!passes) return timeline;

  // Walk the critical path back from the pass that ends last.
  timeline.critical_forwards.assign(chunks, 0);
  timeline.critical_backwards.assign(chunks, 0);
  timeline.critical_transfers.assign(std::max(0, chunks - 1), 0);
  int stage =
      static_cast<int>(std::max_element(timeline.finish_s.begin(), timeline.finish_s.end()) -
                       timeline.finish_s.begin());
  int index = total_passes - 1;
  while (index >= 0) {
    const PipelineStep step = timeline.stages[stage][index].step;
    (step.pass == Pass::forward ? timeline.critical_forwards
                                : timeline.critical_backwards)[step.chunk] += 1;
    if (blocking && outgoing_boundary(step) >= 0) {
      timeline.critical_transfers[outgoing_boundary(step)] += 1;
    }
    const Binding binding = bindings[stage][index];
    if (binding == Binding::none) break;
    if (binding == Binding::stage) {
      --index;
      continue;
    }
    int input_key = 0;
    if (step.pass == Pass::forward) {
      if (!blocking) timeline.critical_transfers[step.chunk - 1] += 1;
      input_key = key(step.chunk - 1, step.micro_batch, Pass::forward);
    } else if (step.chunk == chunks - 1) {
      input_key = key(step.chunk, step.micro_batch, Pass::forward);
    } else {
      if (!blocking) timeline.critical_transfers[step.chunk] += 1;
      input_key = key(step.chunk + 1, step.micro_batch, Pass::backward);
    }
    std::tie(stage, index) = slot_of[input_key];
  }
  return timeline;
}

std::string pipeline_chrome_trace(const PipelineTimeline& timeline, const std::string& title,
                                  const std::vector<double>& stage_state_bytes,
                                  const std::vector<double>& chunk_activation_bytes,
                                  const std::vector<double>& stage_synchronised_s) {
  constexpr double us_per_s = 1e6;
  const bool memory = !stage_state_bytes.empty() && !chunk_activation_bytes.empty();
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t stage = 0; stage < timeline.stages.size(); ++stage) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", stage},
                      {"tid", 0},
                      {"args", {{"name", fmt::format("{}, stage {}", title, stage)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", stage},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    if (stage < stage_synchronised_s.size() && stage < timeline.finish_s.size() &&
        stage_synchronised_s[stage] > timeline.finish_s[stage]) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", stage},
                        {"tid", 1},
                        {"args", {{"name", "gradients"}}}});
      events.push_back(chrome_complete_event(
          "gradient reductions", "reduce", static_cast<int>(stage), 1, timeline.finish_s[stage],
          stage_synchronised_s[stage] - timeline.finish_s[stage]));
    }
    // The stage idle before a pass, from the pipeline's first pass on: it waited for a
    // neighbour's pass and the transfer (the runtime's "receive" waits, on their own track).
    bool waits_named = false;
    double idle_from_s = timeline.first_start_s;
    for (const TimedStep& step : timeline.stages[stage]) {
      const double idle_s = step.start_s - idle_from_s;
      idle_from_s = step.end_s;
      if (idle_s <= 1e-12) continue;
      if (!waits_named) {
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", stage},
                          {"tid", 2},
                          {"args", {{"name", "compute waits"}}}});
        waits_named = true;
      }
      events.push_back(chrome_complete_event("receive", "wait", static_cast<int>(stage), 2,
                                             step.start_s - idle_s, idle_s,
                                             {{"waited_s", idle_s}}));
    }
    double activations = 0;
    auto counter = [&](double time_s) {
      events.push_back(
          {{"ph", "C"},
           {"name", "memory"},
           {"pid", stage},
           {"tid", 0},
           {"ts", time_s * us_per_s},
           {"args", {{"model_states", stage_state_bytes[stage]}, {"activations", activations}}}});
    };
    if (memory) counter(0.0);
    for (const TimedStep& step : timeline.stages[stage]) {
      const bool forward = step.step.pass == Pass::forward;
      events.push_back(
          chrome_complete_event(fmt::format("{} {}", forward ? "F" : "B", step.step.micro_batch),
                                forward ? "forward" : "backward", static_cast<int>(stage), 0,
                                step.start_s, step.end_s - step.start_s,
                                {{"pass", forward ? "forward" : "backward"},
                                 {"chunk", step.step.chunk},
                                 {"micro_batch", step.step.micro_batch}}));
      if (!memory) continue;
      // A forward keeps its activations from its start; a backward frees them at its end.
      const double bytes = chunk_activation_bytes[step.step.chunk];
      if (forward) {
        activations += bytes;
        counter(step.start_s);
      } else {
        activations -= bytes;
        counter(step.end_s);
      }
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

double ideal_bubble_ratio(PipelineSchedule schedule, int stages, int chunks_per_stage,
                          int micro_batches) {
  const double bubble = static_cast<double>(stages - 1) / micro_batches;
  return schedule == PipelineSchedule::interleaved ? bubble / chunks_per_stage : bubble;
}

int ideal_in_flight(PipelineSchedule schedule, int stages, int micro_batches, int stage,
                    int chunks_per_stage) {
  if (schedule == PipelineSchedule::gpipe) return micro_batches;
  if (schedule == PipelineSchedule::interleaved && chunks_per_stage > 1) {
    // With as many micro-batches as stages Megatron runs every forward first.
    if (micro_batches == stages) return chunks_per_stage * micro_batches;
    return std::min(chunks_per_stage * micro_batches,
                    2 * (stages - stage - 1) + (chunks_per_stage - 1) * stages + 1);
  }
  return std::min(stages - stage, micro_batches);
}

}  // namespace osdp
