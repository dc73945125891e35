// Pipeline schedules (model/pipeline_schedule): the event timeline reproduces the closed forms
// where they hold (equal stages, free transfers: bubble (p - 1) / m, interleaved (p - 1) / (v m);
// 1F1B holds p - r micro-batches on stage r, GPipe m), every pass runs once and after its
// input, and the critical path sums to the makespan.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
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

TEST_CASE("shared cores: passes speed up while other stages wait", "[pipeline]") {
  // 1F1B on 2 stages, 2 micro-batches, F = 1, B = 2; alone a stage computes twice as fast.
  // By hand: S0 F0 0-0.5 (alone); S0 F1 and S1 F0 0.5-1.5 (together); S1 B0 1.5-2.5 (alone);
  // S0 B0 2.5-4.5 and S1 F1 2.5-3.5 (together), S1 B1 3.5-5.0 (together to 4.5, 1 left alone);
  // S0 B1 5.0-6.0 (alone). Without sharing it takes 9.
  PipelineWork work = equal_work(2, 1, 2, 1.0, 2.0);
  CHECK(run_pipeline(PipelineSchedule::one_f_one_b, work).makespan_s == Approx(9.0));
  work.rate_by_busy_stages = {2.0, 1.0};
  const PipelineTimeline timeline = run_pipeline(PipelineSchedule::one_f_one_b, work);
  CHECK(timeline.makespan_s == Approx(6.0));
  CHECK(timeline.finish_s[1] == Approx(5.0));
  CHECK(timeline.busy_s[0] == Approx(4.5));
  CHECK(timeline.busy_s[1] == Approx(4.5));
  CHECK(timeline.work_s[0] == Approx(6.0));  // m (F + B) at the all-busy rate
  CHECK(timeline.work_s[1] == Approx(6.0));
  REQUIRE(timeline.stages[0].size() == 4);
  CHECK(timeline.stages[0][2].start_s == Approx(2.5));
  CHECK(timeline.stages[0][2].end_s == Approx(4.5));
  // Work is conserved: over every stretch, the busy stages' rate times their count sums to the
  // passes' durations (2 m (F + B) = 12).
  std::vector<double> edges;
  for (const auto& stage : timeline.stages) {
    for (const TimedStep& step : stage) {
      edges.push_back(step.start_s);
      edges.push_back(step.end_s);
    }
  }
  std::sort(edges.begin(), edges.end());
  double work_done = 0;
  for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
    const double middle = 0.5 * (edges[i] + edges[i + 1]);
    int busy = 0;
    for (const auto& stage : timeline.stages) {
      for (const TimedStep& step : stage) busy += step.start_s < middle && middle < step.end_s;
    }
    if (busy > 0)
      work_done += busy * work.rate_by_busy_stages[busy - 1] * (edges[i + 1] - edges[i]);
  }
  CHECK(work_done == Approx(12.0));
}

TEST_CASE("shared cores at one rate for any number of busy stages: the passes scaled",
          "[pipeline]") {
  // Every stage twice as fast whatever runs beside it: the timeline is the one of halved passes
  // (the transfers, delays off the stages, unchanged), for every schedule and shape.
  for (PipelineSchedule schedule :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    for (int p : {2, 3, 4}) {
      const int v = schedule == PipelineSchedule::interleaved ? 2 : 1;
      for (int m : {p, 2 * p}) {
        PipelineWork shared = equal_work(p, v, m, 1.0, 2.5, 0.3);
        shared.forward_s[0] = 1.7;  // unequal chunks
        shared.backward_s.back() = 0.4;
        shared.stage_ready_s.assign(p, 0.0);
        shared.stage_ready_s[1] = 0.9;
        shared.rate_by_busy_stages.assign(p, 2.0);
        PipelineWork halved = shared;
        halved.rate_by_busy_stages.clear();
        for (double& s : halved.forward_s) s /= 2;
        for (double& s : halved.backward_s) s /= 2;
        const PipelineTimeline a = run_pipeline(schedule, shared);
        const PipelineTimeline b = run_pipeline(schedule, halved);
        CHECK(a.makespan_s == Approx(b.makespan_s));
        for (int r = 0; r < p; ++r) {
          CHECK(a.finish_s[r] == Approx(b.finish_s[r]));
          CHECK(a.busy_s[r] == Approx(b.busy_s[r]));
          CHECK(a.peak_in_flight[r] == b.peak_in_flight[r]);
          REQUIRE(a.stages[r].size() == b.stages[r].size());
          for (std::size_t i = 0; i < a.stages[r].size(); ++i) {
            CHECK(a.stages[r][i].start_s == Approx(b.stages[r][i].start_s));
          }
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
    // And as soon as both are in: no stage waits for more than its input and its last pass.
    for (int r = 0; r < p; ++r) {
      double free_s = 0;
      for (const TimedStep& step : timeline.stages[r]) {
        const auto [chunk, micro, pass] = std::make_tuple(step.step.chunk, step.step.micro_batch,
                                                          static_cast<int>(step.step.pass));
        double ready_s = 0;
        if (pass == 0 && chunk > 0) {
          ready_s = ran[{chunk - 1, micro, 0}].end_s + work.transfer_s[chunk - 1];
        } else if (pass == 1 && chunk + 1 < work.chunks()) {
          ready_s = ran[{chunk + 1, micro, 1}].end_s + work.transfer_s[chunk];
        } else if (pass == 1) {
          ready_s = ran[{chunk, micro, 0}].end_s;
        }
        CHECK(step.start_s == std::max(ready_s, free_s));
        free_s = step.end_s;
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

TEST_CASE("the trace's compute waits are each stage's idle time before its passes", "[pipeline]") {
  struct Case {
    PipelineSchedule schedule;
    int stages, chunks_per_stage, micro_batches;
  };
  for (const Case& shape :
       {Case{PipelineSchedule::gpipe, 4, 1, 6}, Case{PipelineSchedule::one_f_one_b, 4, 1, 6},
        Case{PipelineSchedule::interleaved, 2, 2, 4}}) {
    INFO(pipeline_schedule_name(shape.schedule)
         << ", p " << shape.stages << ", m " << shape.micro_batches);
    PipelineWork work =
        equal_work(shape.stages, shape.chunks_per_stage, shape.micro_batches, 1.0, 2.0, 0.1);
    work.backward_s.back() = 3.5;  // an unequal last chunk: waits on the other stages
    const PipelineTimeline timeline = run_pipeline(shape.schedule, work);
    const auto trace = nlohmann::json::parse(pipeline_chrome_trace(timeline, "test"));
    std::map<int, double> waited_s;
    std::map<int, std::set<long long>> pass_starts_us, wait_ends_us;
    for (const auto& event : trace["traceEvents"]) {
      if (event["ph"] != "X") continue;
      const int stage = event["pid"];
      const double start_us = event["ts"];
      const double duration_us = event["dur"];
      if (event["cat"] == "wait") {
        CHECK(event["tid"] == 2);
        CHECK(event["name"] == "receive");
        CHECK(duration_us > 0);
        waited_s[stage] += duration_us / 1e6;
        wait_ends_us[stage].insert(std::llround(start_us + duration_us));
      } else {
        pass_starts_us[stage].insert(std::llround(start_us));
      }
    }
    for (int stage = 0; stage < shape.stages; ++stage) {
      INFO("stage " << stage);
      // Idle before passes plus busy: from the first pass to the stage's last one's end.
      CHECK(waited_s[stage] + timeline.busy_s[stage] ==
            Approx(timeline.finish_s[stage] - timeline.first_start_s));
      for (long long end_us : wait_ends_us[stage]) CHECK(pass_starts_us[stage].count(end_us) == 1);
    }
    CHECK(waited_s[shape.stages - 1] > 0);  // the last stage waits for the first forwards
  }
}

// The orders as the schedules' papers write them, loop by loop: GPipe every forward then every
// backward; 1F1B p - r - 1 warm-up forwards, then one forward and one backward by turns, then
// the remaining backwards; interleaved likewise over the stage's chunks, Megatron's warm-up.
std::vector<PipelineStep> order_by_loops(PipelineSchedule schedule, int p, int v, int m, int r) {
  const auto interleaved = [&](int k, Pass pass) {
    int chunk_in_stage = (k % (p * v)) / p;
    if (pass == Pass::backward) chunk_in_stage = v - 1 - chunk_in_stage;
    return PipelineStep{chunk_in_stage * p + r, (k / (p * v)) * p + k % p, pass};
  };
  const auto step = [&](int k, Pass pass) {
    return schedule == PipelineSchedule::interleaved ? interleaved(k, pass)
                                                     : PipelineStep{r, k, pass};
  };
  const int total = m * v;
  int warmup = total;
  if (schedule == PipelineSchedule::one_f_one_b) warmup = std::min(p - r - 1, m);
  if (schedule == PipelineSchedule::interleaved && m != p) {
    warmup = std::min(total, (p - r - 1) * 2 + (v - 1) * p);
  }
  std::vector<PipelineStep> order;
  for (int k = 0; k < warmup; ++k) order.push_back(step(k, Pass::forward));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(step(warmup + k, Pass::forward));
    order.push_back(step(k, Pass::backward));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(step(k, Pass::backward));
  return order;
}

TEST_CASE("a stage's order, worked out pass by pass, is its schedule's", "[pipeline]") {
  int compared = 0;
  for (PipelineSchedule schedule :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    for (int p = 1; p <= 6; ++p) {
      for (int v = 1; v <= (schedule == PipelineSchedule::interleaved ? 3 : 1); ++v) {
        for (int m = 1; m <= 13; ++m) {
          if (schedule == PipelineSchedule::interleaved && m % p != 0) {
            CHECK_THROWS_AS(StageOrder(schedule, p, v, m, 0), std::invalid_argument);
            continue;
          }
          for (int r = 0; r < p; ++r) {
            CAPTURE(pipeline_schedule_name(schedule), p, v, m, r);
            const StageOrder order(schedule, p, v, m, r);
            const std::vector<PipelineStep> expected = order_by_loops(schedule, p, v, m, r);
            REQUIRE(order.size() == static_cast<int>(expected.size()));
            for (int k = 0; k < order.size(); ++k) {
              CHECK(order[k].chunk == expected[k].chunk);
              CHECK(order[k].micro_batch == expected[k].micro_batch);
              CHECK(order[k].pass == expected[k].pass);
              ++compared;
            }
          }
        }
      }
    }
  }
  CHECK(compared > 4000);
  CHECK_THROWS_AS(StageOrder(PipelineSchedule::one_f_one_b, 4, 2, 8, 0), std::invalid_argument);
  CHECK_THROWS_AS(StageOrder(PipelineSchedule::gpipe, 4, 1, 8, 4), std::invalid_argument);
  // More passes than an int counts: refused, not wrapped around.
  CHECK_THROWS_AS(StageOrder(PipelineSchedule::interleaved, 2, 40, 1 << 24, 0),
                  std::invalid_argument);
  CHECK(StageOrder(PipelineSchedule::gpipe, 2, 1, 1 << 24, 1).size() == 1 << 25);
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
