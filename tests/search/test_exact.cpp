// The exact search against brute force on random small instances: same optimal time, and the
// plan it returns really fits and costs what it says.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "search/exact.hpp"
#include "search/options.hpp"
#include "tests/support/random_instances.hpp"

using namespace osdp;

namespace {

// The peak written out here, apart from the cost model and the search: the largest of the
// moment while an operator from the third in execution order on runs (persistent sum + their
// largest transient + the window of the largest gather buffer but the first operator's), the
// moment while the second runs (persistent sum + its transient + the window of the larger of
// the first's buffer and that largest buffer), and the moment while the first runs its backward,
// last of all (persistent sum less the activations of the others that are surely freed then,
// each one's least over its options, + its transient + the window of the larger of the second's
// buffer and its own next sharded slice's).
struct Maxima {
  double others = 0, buffer = 0, last = 0, last_buffer = 0, last_next_slice = 0, beside = 0,
         beside_buffer = 0;
};

// Enumerates every combination of (unpruned) choices.
struct BruteForce {
  const CostModel& model;
  int batch;
  double limit;
  std::vector<std::vector<OptionCost>> costs;
  double freed = 0;  // the others' least activations
  double best = std::numeric_limits<double>::infinity();

  BruteForce(const CostModel& m, const SearchSpec& spec, int b, double l)
      : model(m), batch(b), limit(l) {
    const int first = m.workload().execution_order().front();
    for (int i = 0; i < m.workload().size(); ++i) {
      std::vector<OptionCost> options;
      double least = std::numeric_limits<double>::infinity();
      for (const auto& choice : enumerate_choices(m, i, spec)) {
        options.push_back(m.option_cost(i, choice));
        least = std::min(least, b * options.back().persistent_bytes.per_sample);
      }
      if (i != first && !options.empty()) freed += least;
      costs.push_back(options);
    }
  }

  void run(std::size_t i = 0, double time = 0, double persistent = 0, Maxima maxima = {}) {
    if (i == costs.size()) {
      const std::size_t n = costs.size();
      const double others =
          n <= 2 ? persistent
                 : persistent + maxima.others + model.prefetch_window_bytes(maxima.buffer);
      const double beside =
          n <= 1 ? persistent
                 : persistent + maxima.beside +
                       model.prefetch_window_bytes(std::max(maxima.last_buffer, maxima.buffer));
      const double last =
          persistent - freed + maxima.last +
          model.prefetch_window_bytes(std::max(maxima.beside_buffer, maxima.last_next_slice));
      if (fits(std::max({others, beside, last}), limit)) best = std::min(best, time);
      return;
    }
    const auto& order = model.workload().execution_order();
    const bool last = static_cast<int>(i) == order.front();
    const bool beside_last = order.size() > 1 && static_cast<int>(i) == order[1];
    for (const auto& cost : costs[i]) {
      Maxima next = maxima;
      const double transient = cost.transient_bytes.at(batch);
      if (last) {
        next.last = transient;
        next.last_buffer = cost.gather_buffer_bytes;
        next.last_next_slice = cost.next_slice_buffer_bytes;
      } else {
        next.buffer = std::max(next.buffer, cost.gather_buffer_bytes);
        if (beside_last) {
          next.beside = transient;
          next.beside_buffer = cost.gather_buffer_bytes;
        } else {
          next.others = std::max(next.others, transient);
        }
      }
      run(i + 1, time + cost.time_s.at(batch), persistent + cost.persistent_bytes.at(batch), next);
    }
  }

  double combinations() const {
    double total = 1;
    for (const auto& options : costs) total *= static_cast<double>(options.size());
    return total;
  }
};

SearchSpec spec_for(unsigned seed) {
  SearchSpec spec;
  spec.optimality_gap = 0;
  spec.time_limit_s = 1e9;
  switch (seed % 5) {
    case 0:
      spec.modes = {Mode::dp, Mode::zdp};
      break;
    case 1:
      spec.modes = {Mode::dp, Mode::zdp};
      spec.granularities = {1, 2};
      break;
    case 2:
      spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
      spec.checkpoint = SearchSpec::CheckpointPolicy::automatic;
      break;
    case 3:
      spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
      spec.granularities = {1, 4};
      spec.checkpoint = SearchSpec::CheckpointPolicy::automatic;
      break;
    default:
      spec.modes = {Mode::zdp, Mode::z2};
      spec.checkpoint = SearchSpec::CheckpointPolicy::on;
      break;
  }
  return spec;
}

}  // namespace

TEST_CASE("exact search equals brute force on random small instances", "[search][exact]") {
  int compared = 0;
  int infeasible = 0;
  for (unsigned seed = 1; seed <= 120; ++seed) {
    const CostModelKind kind = seed % 2 == 0 ? CostModelKind::paper : CostModelKind::extended;
    const SearchSpec spec = spec_for(seed);
    int operators = 14;
    auto instance = exactness::random_instance(seed, operators, kind);
    auto model = instance.model();
    // Shrink until brute force is affordable.
    while (BruteForce(model, spec, 1, 0).combinations() > 3e5 && operators > 2) {
      --operators;
      instance = exactness::random_instance(seed, operators, kind);
      model = instance.model();
    }
    const int batch = 1 + static_cast<int>(seed % 4);
    const double least = min_peak_memory_bytes(model, spec, batch);
    // Limits between the least memory any plan needs and well above it.
    for (double factor : {0.99, 1.0, 1.15, 1.6, 3.0}) {
      const double limit = least * factor;
      BruteForce brute(model, spec, batch, limit);
      brute.run();
      const auto found = solve_batch(model, spec, batch, limit);
      INFO("seed " << seed << " operators " << operators << " factor " << factor);
      if (!std::isfinite(brute.best)) {
        CHECK_FALSE(found.has_value());
        ++infeasible;
        continue;
      }
      REQUIRE(found.has_value());
      CHECK(found->cost.iteration_time_s == Approx(brute.best).epsilon(1e-9));
      CHECK(fits(found->cost.peak_memory_bytes, limit));
      ++compared;
    }
  }
  CHECK(compared > 300);
  CHECK(infeasible > 50);  // factor 0.99 never fits
}

TEST_CASE("plan cost agrees with the sum of option costs", "[search][exact]") {
  auto instance = exactness::random_instance(7, 30, CostModelKind::extended);
  const auto model = instance.model();
  SearchSpec spec;
  spec.optimality_gap = 0;
  spec.time_limit_s = 1e9;
  spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
  spec.granularities = {1, 4};
  spec.checkpoint = SearchSpec::CheckpointPolicy::automatic;
  const double limit = min_peak_memory_bytes(model, spec, 2) * 1.3;
  const auto found = solve_batch(model, spec, 2, limit);
  REQUIRE(found.has_value());
  double time = 0, persistent = 0, transient = 0, buffer = 0, resting = 0;
  const int last = model.workload().execution_order().front();
  const int beside_last = model.workload().execution_order()[1];
  for (int i = 0; i < model.workload().size(); ++i) {
    const auto cost = model.option_cost(i, found->plan.choices[i]);
    time += cost.time_s.at(2);
    persistent += cost.persistent_bytes.at(2);
    resting += cost.persistent_bytes.fixed;
    if (i != last && i != beside_last) transient = std::max(transient, cost.transient_bytes.at(2));
    if (i != last) buffer = std::max(buffer, cost.gather_buffer_bytes);
  }
  // Units in flight 2: a window of one buffer. The operator that runs last in backward has
  // beside the states only its own activations, its transient and its neighbour's buffer; its
  // neighbour has the larger of its neighbours' buffers beside it.
  const auto last_cost = model.option_cost(last, found->plan.choices[last]);
  const auto beside_cost = model.option_cost(beside_last, found->plan.choices[beside_last]);
  const double last_term =
      resting + last_cost.persistent_bytes.at(2) - last_cost.persistent_bytes.fixed +
      last_cost.transient_bytes.at(2) +
      std::max(beside_cost.gather_buffer_bytes, last_cost.next_slice_buffer_bytes);
  const double beside_term = persistent + beside_cost.transient_bytes.at(2) +
                             std::max(last_cost.gather_buffer_bytes, buffer);
  CHECK(buffer > 0);
  CHECK(found->cost.iteration_time_s == Approx(time).epsilon(1e-12));
  CHECK(found->cost.peak_memory_bytes ==
        Approx(std::max({persistent + transient + buffer, beside_term, last_term})).epsilon(1e-12));
  CHECK(found->cost.peak_memory_bytes <= limit * (1 + 1e-12));
}

TEST_CASE("batch-size scheduler keeps the highest throughput", "[search][scheduler]") {
  for (unsigned seed = 200; seed < 210; ++seed) {
    auto instance = exactness::random_instance(seed, 12, CostModelKind::extended);
    instance.training->max_batch_size = 24;
    const auto model = instance.model();
    SearchSpec spec;
    spec.optimality_gap = 0;
    spec.time_limit_s = 1e9;
    spec.modes = {Mode::dp, Mode::zdp};
    const double limit = min_peak_memory_bytes(model, spec, 6);
    const SearchResult result = search(model, spec, limit);
    REQUIRE(result.best.has_value());
    const SearchResult every = search(model, spec, limit, /*solve_every_batch=*/true);
    // Every b up to the last that fits, solved independently, is no better; the best of them
    // is the scheduler's; and solving every b reproduces each one's own optimum.
    double best_alone = 0;
    int fitting = 0;
    for (int b = 1; b <= 24; ++b) {
      const auto alone = solve_batch(model, spec, b, limit);
      if (!alone) {
        CHECK(b > 6);
        continue;
      }
      ++fitting;
      CHECK(fitting == b);  // the batch sizes that fit are 1..last
      best_alone = std::max(best_alone, alone->cost.throughput_samples_per_s);
      CHECK(alone->cost.throughput_samples_per_s <=
            result.best->cost.throughput_samples_per_s * (1 + 1e-12));
      REQUIRE(every.per_batch.size() >= static_cast<std::size_t>(b));
      const BatchPoint& point = every.per_batch[static_cast<std::size_t>(b - 1)];
      CHECK(point.batch_size == b);
      REQUIRE(point.best.has_value());
      CHECK(point.best->cost.iteration_time_s ==
            Approx(alone->cost.iteration_time_s).epsilon(1e-12));
    }
    CHECK(result.per_batch.size() == static_cast<std::size_t>(fitting));
    CHECK(every.per_batch.size() == static_cast<std::size_t>(fitting));
    CHECK(result.best->cost.throughput_samples_per_s == Approx(best_alone).epsilon(1e-12));
    REQUIRE(every.best.has_value());
    CHECK(every.best->plan.batch_size == result.best->plan.batch_size);
  }
}

TEST_CASE("nothing fits: the least memory needed is reported", "[search][scheduler]") {
  auto instance = exactness::random_instance(3, 10, CostModelKind::paper);
  const auto model = instance.model();
  SearchSpec spec;
  const double least = min_peak_memory_bytes(model, spec, 1);
  const SearchResult result = search(model, spec, least * 0.5);
  CHECK_FALSE(result.best.has_value());
  CHECK(result.min_memory_needed_bytes == Approx(least));
}
