#include "search/units_search.hpp"

#include <algorithm>

namespace osdp {
namespace {

int block_count(const Workload& workload) {
  return static_cast<int>(unit_sizes(workload, {WrappingRule::Kind::per_block}).size());
}

void tag_units(SearchResult& result, const std::vector<int>& sizes) {
  if (result.best) result.best->plan.unit_sizes = sizes;
  for (BatchPoint& point : result.per_batch) {
    if (point.best) point.best->plan.unit_sizes = sizes;
  }
}

bool better(const std::optional<ScheduledPlan>& candidate,
            const std::optional<ScheduledPlan>& incumbent) {
  return candidate && (!incumbent || candidate->cost.throughput_samples_per_s >
                                         incumbent->cost.throughput_samples_per_s);
}

// Adds one candidate's result into the merged one.
void merge(SearchResult& merged, const SearchResult& result, bool first) {
  if (better(result.best, merged.best)) merged.best = result.best;
  for (const BatchPoint& point : result.per_batch) {
    auto existing =
        std::find_if(merged.per_batch.begin(), merged.per_batch.end(),
                     [&](const BatchPoint& p) { return p.batch_size == point.batch_size; });
    if (existing == merged.per_batch.end()) {
      merged.per_batch.push_back(point);
      continue;
    }
    if (better(point.best, existing->best)) existing->best = point.best;
    existing->stopped_early = existing->stopped_early || point.stopped_early;
    existing->pruned_by_bound = existing->pruned_by_bound && point.pruned_by_bound;
  }
  merged.min_memory_needed_bytes =
      first ? result.min_memory_needed_bytes
            : std::min(merged.min_memory_needed_bytes, result.min_memory_needed_bytes);
  merged.stats.nodes += result.stats.nodes;
  merged.stats.thresholds += result.stats.thresholds;
  merged.stats.stopped_early = merged.stats.stopped_early || result.stats.stopped_early;
  merged.proven_gap = first ? result.proven_gap : std::max(merged.proven_gap, result.proven_gap);
}

}  // namespace

std::vector<WrappingCandidate> candidate_wrappings(const Workload& workload,
                                                   const SearchSpec& spec) {
  std::vector<WrappingRule> rules;
  if (spec.units == SearchSpec::UnitsPolicy::block) {
    rules.push_back({WrappingRule::Kind::per_block});
  } else {
    rules.push_back({WrappingRule::Kind::per_operator});
    if (spec.units == SearchSpec::UnitsPolicy::automatic) {
      const int blocks = block_count(workload);
      for (int k = 1; k < blocks; k *= 2) rules.push_back({WrappingRule::Kind::per_block, k});
      rules.push_back({WrappingRule::Kind::min_parameters, 1, spec.min_unit_parameters});
    }
  }
  std::vector<WrappingCandidate> candidates;
  for (const WrappingRule& rule : rules) {
    std::vector<int> sizes = unit_sizes(workload, rule);
    const bool seen =
        std::any_of(candidates.begin(), candidates.end(),
                    [&](const WrappingCandidate& c) { return c.unit_sizes == sizes; });
    if (!seen) candidates.push_back({rule, std::move(sizes)});
  }
  return candidates;
}

SearchResult search_over_units(const CostModel& model, const SearchSpec& spec,
                               std::optional<double> memory_limit_bytes, bool solve_every_batch,
                               std::vector<WrappingOutcome>* outcomes) {
  const std::vector<WrappingCandidate> candidates = candidate_wrappings(model.workload(), spec);
  SearchSpec one = spec;
  one.units = SearchSpec::UnitsPolicy::off;
  one.time_limit_s = spec.time_limit_s / static_cast<double>(candidates.size());
  SearchResult merged;
  bool first = true;
  for (const WrappingCandidate& candidate : candidates) {
    const bool per_operator = candidate.rule.kind == WrappingRule::Kind::per_operator;
    SearchResult result;
    if (per_operator) {
      result = search(model, one, memory_limit_bytes, solve_every_batch);
    } else {
      const Workload wrapped = wrap_workload(model.workload(), candidate.unit_sizes);
      const CostModel wrapped_model(wrapped, model.cluster(), model.training(), model.settings());
      result = search(wrapped_model, one, memory_limit_bytes, solve_every_batch);
      tag_units(result, candidate.unit_sizes);
    }
    merge(merged, result, first);
    first = false;
    if (outcomes) outcomes->push_back({candidate, std::move(result)});
  }
  std::sort(merged.per_batch.begin(), merged.per_batch.end(),
            [](const BatchPoint& a, const BatchPoint& b) { return a.batch_size < b.batch_size; });
  return merged;
}

}  // namespace osdp
