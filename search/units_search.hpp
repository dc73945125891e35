// FSDP units as a search decision (`--units`, scenario `search.units`): how the chain of
// operators is wrapped into units, searched together with each unit's mode.
//
// The exact search needs a plan's time to be a sum over independent items, which unit
// boundaries break (a unit's collectives and gather buffer depend on its neighbours). So the
// wrapping is chosen among a family of candidates and each candidate is searched exactly:
// one unit per operator, one unit per 1, 2, 4, ... consecutive transformer blocks, and the
// size-based wrapping at `min_unit_parameters`. The best plan over all of them wins (its
// Plan::unit_sizes say how it wraps the model). `block` searches only the per-block wrapping.
// Not every partition of the chain is tried: a plan that needs an irregular wrapping (say one
// large unit in the middle) is outside the family.
#pragma once

#include <optional>
#include <vector>

#include "model/wrapping.hpp"
#include "search/exact.hpp"

namespace osdp {

struct WrappingCandidate {
  WrappingRule rule;
  std::vector<int> unit_sizes;
};

// The wrappings `spec.units` asks to search, without duplicates (two rules that give the same
// units are searched once).
std::vector<WrappingCandidate> candidate_wrappings(const Workload& workload,
                                                   const SearchSpec& spec);

struct WrappingOutcome {
  WrappingCandidate candidate;
  SearchResult result;  // its plans carry the candidate's unit sizes
};

// Searches every candidate wrapping (each with an equal share of the spec's time limit) and
// merges them: `best` the highest throughput over all, per_batch the best plan of each batch
// size over all. `outcomes`, when given, receives each candidate's own result.
SearchResult search_over_units(const CostModel& model, const SearchSpec& spec,
                               std::optional<double> memory_limit_bytes, bool solve_every_batch,
                               std::vector<WrappingOutcome>* outcomes = nullptr);

}  // namespace osdp
