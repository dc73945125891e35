// The options the search may give each operator: mode x split granularity x sharded-slice count
// x checkpoint, as the SearchSpec restricts them, with their costs. Options that another option
// of the same operator beats on time, persistent and transient memory are dropped here.
#pragma once

#include <vector>

#include "model/cost_model.hpp"
#include "model/scenario.hpp"

namespace osdp {

struct CostedOption {
  OperatorChoice choice;
  OptionCost cost;
};

// Every valid choice for the operator under the spec (no pruning).
std::vector<OperatorChoice> enumerate_choices(const CostModel& model, int op,
                                              const SearchSpec& spec);

// The choices with their costs, dominated ones removed (a choice is dominated when another is
// no worse in time, persistent and transient memory for every batch size).
std::vector<CostedOption> costed_options(const CostModel& model, int op, const SearchSpec& spec);

// Memory comparisons with a relative slack, shared by every solver so they agree on "fits".
inline bool fits(double bytes, double limit_bytes) {
  return bytes <= limit_bytes * (1.0 + 1e-12) + 1e-6;
}

}  // namespace osdp
