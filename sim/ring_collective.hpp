// Ring collectives on the simulated network.
//   step mode:  ring_steps(kind, N) rounds; in each, every ring edge carries S/N bytes (split over
//               its channels); a round starts when the previous one's bytes have arrived and its
//               latency alpha has passed, so an uncontended ring takes steps * (alpha + S/N *
//               beta) with alpha the mean edge latency (chunks pipeline hop by hop, as NCCL's
//               rings) and beta the narrowest edge's seconds per byte.
//   scale mode: one flow per ring edge and channel of steps * S/N bytes, then steps * alpha,
//               which reproduces the same time when uncontended with N flows instead of
//               N * steps. While another ring shares a link
//               with it, the ring moves in step-mode rounds instead (at most 64 per collective),
//               so that contended rings agree with step mode.
// Paper-form (logical) rings cost alpha + bytes * beta per step from the group's timing.
#pragma once

#include <functional>

#include "model/collectives.hpp"
#include "sim/kernel.hpp"

namespace osdp::sim {

// Starts the collective over `ring` now; calls `done` when every rank has finished.
// `alone`: the caller guarantees no other traffic can meet this collective on the network (one
// lane of collectives, no host copies: collectives run one at a time). In scale mode it then
// takes its uncontended time, steps * (alpha + S/N / the ring's alone edge rate), as a timer
// with no flows: what its flows would give (tested), without simulating them.
void start_ring_collective(Kernel& kernel, const GroupRing& ring, CollectiveKind kind,
                           double full_bytes, Granularity granularity, std::function<void()> done,
                           bool alone = false);

}  // namespace osdp::sim
