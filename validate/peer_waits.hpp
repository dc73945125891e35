// How much of a rank's exposed communication was waiting for a peer to arrive, not for data.
//
// A ring collective moves nothing until every rank of its group has started it. Where the ranks
// do not keep pace (CPU ranks sharing cores: one rank's step runs 10-20 % slower than the
// other's, and which one changes from step to step), a rank whose communication thread started
// collective i at s_i waits until the last rank's start, S_i; when its compute is blocked over
// that interval (on collective i or one queued behind it), the wait is the peer's lateness. The
// simulation runs every rank at the same pace, so its exposed communication has no such part:
// it is to be set against the measured waits less this one.
#pragma once

#include <vector>

namespace osdp::validate {

struct TimeInterval {
  double start_s = 0;
  double end_s = 0;
};

// Seconds of `waits` (the compute's blocks on collectives, disjoint, steady clock) that fall in
// some [own_starts_s[i], latest_starts_s[i]]: collective i started on this rank, not yet on the
// group's last rank. The two start lists are in issue order, of equal length.
double peer_wait_s(const std::vector<TimeInterval>& waits, const std::vector<double>& own_starts_s,
                   const std::vector<double>& latest_starts_s);

}  // namespace osdp::validate
