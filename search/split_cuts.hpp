// The exact search, run once per split cut so that more split options are never slower.
//
// The search scores each operator's exposed gathers with its neighbours split as finely as the
// options allow (CostSettings::finest_split: the time must stay a sum over operators). With
// `--split auto` that over-counts them for plans that split little, so a larger option set could
// end slower than a smaller one (measured: 5.80 samples/s with --split auto against 6.01 with
// --split 1 at batch 1 on paper-titan-16g-nd-48l-1536h). Here the search also runs with the
// options cut at each coarser split, each scored with its own finest split, and keeps the best
// plan of any, per batch size too, costed as it splits (finest_split(plan)).
#pragma once

#include <optional>

#include "search/exact.hpp"

namespace osdp {

struct SplitCutResult {
  SearchResult result;
  // The finest split of the cut the best plan came from; 0 when it came from the full option
  // set (or when the options hold a single split).
  int taken_from_split = 0;
};

// As search(), over every cut of spec.granularities.
SplitCutResult search_split_cuts(const CostModel& model, const SearchSpec& spec,
                                 std::optional<double> memory_limit_bytes = std::nullopt,
                                 bool solve_every_batch = false);

}  // namespace osdp
