// Pipeline schedules (model/pipeline_schedule): the event timeline reproduces the closed forms
// where they hold (equal stages, free transfers: bubble (p - 1) / m, interleaved (p - 1) / (v m);
// 1F1B holds p - r micro-batches on stage r, GPipe m), every pass runs once and after its
// input, and the critical path sums to the makespan.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "model/pipeline_schedule.hpp"

namespace osdp {
namespace {

PipelineWork equal_work(int stages, int chunks_per_stage, int micro_batches, double forward_s,
                        double backward_s, double transfer_s = 0.0) {
  PipelineWork work;
  work.stages = stages;
  work.chunks_per_stage = chunks_per_stage;
  work.micro_batches = micro_batches;
  work.forward_s.assign(work.chunks(), forward_s / chunks_per_stage);
  work.backward_s.assign(work.chunks(), backward_s / chunks_per_stage);
  work.transfer_s.assign(work.chunks() - 1, transfer_s);
  return work;
}

// The makespan as the sum of the critical path's durations.
double critical_path_s(const PipelineWork& work, const PipelineTimeline& timeline) {
  double total = 0;
  for (int c = 0; c < work.chunks(); ++c) {
    total += timeline.critical_forwards[c] * work.forward_s[c] +
             timeline.critical_backwards[c] * work.backward_s[c];
  }
  for (int b = 0; b + 1 < work.chunks(); ++b)
    total += timeline.critical_transfers[b] * work.transfer_s[b];
  return total;
}

TEST_CASE("equal stages: GPipe and 1F1B take (m + p - 1)(F + B)", "[pipeline]") {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (int p : {1, 2, 4, 8}) {
      for (int m : {1, 3, 8, 32}) {
        const PipelineWork work = equal_work(p, 1, m, 1.0, 2.0);
        const PipelineTimeline timeline = run_pipeline(schedule, work);
        CHECK(timeline.makespan_s == Approx((m + p - 1) * 3.0));
        // Bubble over the ideal m (F + B): the closed form.
        CHECK((timeline.makespan_s - m * 3.0) / (m * 3.0) ==
              Approx(ideal_bubble_ratio(schedule, p, 1, m)));
        CHECK(critical_path_s(work, timeline) == Approx(timeline.makespan_s));
        for (int r = 0; r < p; ++r) {
          CHECK(timeline.peak_in_flight[r] == ideal_in_flight(schedule, p, m, r));
        }
      }
    }
  }
}

TEST_CASE("interleaved 1F1B: bubble (p - 1) / (v m), Megatron's micro-batches in flight",
          "[pipeline]") {
  for (int p : {2, 4}) {
    for (int v : {1, 2, 3}) {
      for (int m : {p, 2 * p, 4 * p}) {
        const PipelineWork work = equal_work(p, v, m, 1.0, 2.0);
        const PipelineTimeline timeline = run_pipeline(PipelineSchedule::interleaved, work);
        CAPTURE(p, v, m);
        CHECK((timeline.makespan_s - m * 3.0) / (m * 3.0) ==
              Approx(ideal_bubble_ratio(PipelineSchedule::interleaved, p, v, m)));
        CHECK(critical_path_s(work, timeline) == Approx(timeline.makespan_s));
        if (v > 1) {
          for (int r = 0; r < p; ++r) {
            CHECK(timeline.peak_in_flight[r] ==
                  ideal_in_flight(PipelineSchedule::interleaved, p, m, r, v));
          }
        }
      }
    }
  }
  CHECK_THROWS_AS(run_pipeline(PipelineSchedule::interleaved, equal_work(4, 2, 6, 1.0, 2.0)),
                  std::invalid_argument);
}

TEST_CASE("unequal stages and transfers: every pass once, after its input", "[pipeline]") {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> duration(0.1, 3.0);
  for (int trial = 0; trial < 60; ++trial) {
    const PipelineSchedule schedule = static_cast<PipelineSchedule>(trial % 3);
    const int p = 1 + trial % 5;
    const int v = schedule == PipelineSchedule::interleaved ? 1 + trial % 3 : 1;
    const int m = schedule == PipelineSchedule::interleaved ? p * (1 + trial % 4) : 1 + trial % 9;
    PipelineWork work = equal_work(p, v, m, 1.0, 1.0);
    for (double& t : work.forward_s) t = duration(random);
    for (double& t : work.backward_s) t = duration(random);
    for (double& t : work.transfer_s) t = 0.1 * duration(random);
    const PipelineTimeline timeline = run_pipeline(schedule, work);
    CAPTURE(trial, p, v, m);

    std::map<std::tuple<int, int, int>, TimedStep> ran;
    for (int r = 0; r < p; ++r) {
      double free_s = 0;
      for (const TimedStep& step : timeline.stages[r]) {
        CHECK(step.step.chunk % p == r);
        CHECK(step.start_s >= free_s - 1e-12);
        free_s = step.end_s;
        const auto key = std::make_tuple(step.step.chunk, step.step.micro_batch,
                                         static_cast<int>(step.step.pass));
        CHECK(ran.count(key) == 0);
        ran[key] = step;
      }
    }
    CHECK(static_cast<int>(ran.size()) == 2 * m * work.chunks());
    for (const auto& [key, step] : ran) {
      const auto [chunk, micro, pass] = key;
      if (pass == 0 && chunk > 0) {
        CHECK(step.start_s >= ran[{chunk - 1, micro, 0}].end_s + work.transfer_s[chunk - 1] - 1e-9);
      }
      if (pass == 1) {
        CHECK(step.start_s >= ran[{chunk, micro, 0}].end_s - 1e-9);
        if (chunk + 1 < work.chunks()) {
          CHECK(step.start_s >= ran[{chunk + 1, micro, 1}].end_s + work.transfer_s[chunk] - 1e-9);
        }
      }
    }
    CHECK(critical_path_s(work, timeline) == Approx(timeline.makespan_s));
    // No schedule beats the one chain every micro-batch must follow, nor the busiest stage.
    double chain = 0;
    for (int c = 0; c < work.chunks(); ++c) chain += work.forward_s[c] + work.backward_s[c];
    for (double t : work.transfer_s) chain += 2 * t;
    CHECK(timeline.makespan_s >= chain - 1e-9);
    for (int r = 0; r < p; ++r) CHECK(timeline.makespan_s >= timeline.busy_s[r] - 1e-9);

    // The summary a search asks for: the same figures, without the passes.
    for (bool blocking : {false, true}) {
      work.blocking_transfers = blocking;
      const PipelineTimeline full = run_pipeline(schedule, work);
      const PipelineTimeline summary = run_pipeline(schedule, work, PipelineRecord::summary);
      CHECK(summary.makespan_s == full.makespan_s);
      CHECK(summary.first_start_s == full.first_start_s);
      CHECK(summary.finish_s == full.finish_s);
      CHECK(summary.busy_s == full.busy_s);
      CHECK(summary.peak_in_flight == full.peak_in_flight);
      CHECK(summary.bubble_fraction() == full.bubble_fraction());
      for (const auto& passes : summary.stages) CHECK(passes.empty());
    }
  }
}

TEST_CASE("schedule names round-trip", "[pipeline]") {
  for (PipelineSchedule schedule :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    CHECK(pipeline_schedule_from_name(pipeline_schedule_name(schedule)) == schedule);
  }
  CHECK_FALSE(pipeline_schedule_from_name("zero-bubble"));
}

}  // namespace
}  // namespace osdp
