#include "search/split_cuts.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace osdp {
namespace {

double throughput_of(const std::optional<ScheduledPlan>& plan) {
  return plan ? plan->cost.throughput_samples_per_s : -1.0;
}

// Keeps, batch size by batch size, the faster plan of the two results.
void merge_per_batch(SearchResult& into, const SearchResult& other) {
  for (BatchPoint& point : into.per_batch) {
    const auto same = std::find_if(
        other.per_batch.begin(), other.per_batch.end(),
        [&](const BatchPoint& candidate) { return candidate.batch_size == point.batch_size; });
    if (same == other.per_batch.end() || throughput_of(same->best) <= throughput_of(point.best)) {
      continue;
    }
    point = *same;
  }
  for (const BatchPoint& point : other.per_batch) {
    const bool known =
        std::any_of(into.per_batch.begin(), into.per_batch.end(),
                    [&](const BatchPoint& mine) { return mine.batch_size == point.batch_size; });
    if (!known) into.per_batch.push_back(point);
  }
  std::sort(into.per_batch.begin(), into.per_batch.end(),
            [](const BatchPoint& a, const BatchPoint& b) { return a.batch_size < b.batch_size; });
}

// A plan costed as it splits (finest_split(plan)), not as the options of the cut it came from
// allowed: never slower, and what `Scenario::cost_model_for` gives it later. Plans of FSDP
// units are costed on their wrapped model by the units search and left as they are.
void cost_as_it_splits(const CostModel& model, std::optional<ScheduledPlan>& plan) {
  if (!plan || !plan->plan.unit_sizes.empty()) return;
  const int finest = finest_split(plan->plan);
  if (finest == model.settings().finest_split) return;
  CostSettings settings = model.settings();
  settings.finest_split = finest;
  plan->cost = CostModel(model.workload(), model.cluster(), model.training(), settings)
                   .plan_cost(plan->plan);
}

}  // namespace

SplitCutResult search_split_cuts(const CostModel& model, const SearchSpec& spec,
                                 std::optional<double> memory_limit_bytes, bool solve_every_batch) {
  SplitCutResult outcome;
  // The cuts share the spec's time limit: each gets what the ones before it left.
  const auto start = std::chrono::steady_clock::now();
  auto time_left_s = [&] {
    return spec.time_limit_s -
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  outcome.result = search(model, spec, memory_limit_bytes, solve_every_batch);
  std::vector<int> splits = spec.granularities;
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  for (std::size_t cut = 0; cut + 1 < splits.size(); ++cut) {
    if (time_left_s() <= 0) {
      outcome.result.stats.stopped_early = true;
      break;
    }
    SearchSpec coarser = spec;
    coarser.time_limit_s = time_left_s();
    coarser.granularities.assign(splits.begin(), splits.begin() + static_cast<long>(cut) + 1);
    CostSettings settings = model.settings();
    settings.finest_split = splits[cut];
    const CostModel coarser_model(model.workload(), model.cluster(), model.training(), settings);
    const SearchResult result =
        search(coarser_model, coarser, memory_limit_bytes, solve_every_batch);
    SearchResult& kept = outcome.result;
    kept.stats.nodes += result.stats.nodes;
    kept.stats.thresholds += result.stats.thresholds;
    kept.stats.stopped_early = kept.stats.stopped_early || result.stats.stopped_early;
    merge_per_batch(kept, result);
    if (throughput_of(result.best) > throughput_of(kept.best)) {
      kept.best = result.best;
      kept.proven_gap = result.proven_gap;
      kept.host_memory_note = result.host_memory_note;
      outcome.taken_from_split = splits[cut];
    }
  }
  SearchResult& kept = outcome.result;
  for (BatchPoint& point : kept.per_batch) cost_as_it_splits(model, point.best);
  cost_as_it_splits(model, kept.best);
  return outcome;
}

}  // namespace osdp
