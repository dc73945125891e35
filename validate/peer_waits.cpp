#include "validate/peer_waits.hpp"

#include <algorithm>
#include <stdexcept>

namespace osdp::validate {

double peer_wait_s(const std::vector<TimeInterval>& waits, const std::vector<double>& own_starts_s,
                   const std::vector<double>& latest_starts_s) {
  if (own_starts_s.size() != latest_starts_s.size()) {
    throw std::invalid_argument("peer_wait_s: one latest start per collective expected");
  }
  // One communication thread runs the collectives in turn, so the intervals are disjoint, as
  // the compute's waits are: the overlap of the two sets is the sum of pairwise overlaps.
  double total_s = 0;
  for (const TimeInterval& wait : waits) {
    for (std::size_t i = 0; i < own_starts_s.size(); ++i) {
      const double start_s = std::max(wait.start_s, own_starts_s[i]);
      const double end_s = std::min(wait.end_s, latest_starts_s[i]);
      if (end_s > start_s) total_s += end_s - start_s;
    }
  }
  return total_s;
}

}  // namespace osdp::validate
