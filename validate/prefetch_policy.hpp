// FSDP's BackwardPrefetch as the runtime follows it. The scenario's
// "simulation"."backward_prefetch" sets it for the simulator and the runtime alike (one source
// of truth), so a measured run and its simulation issue the same gathers at the same points.
//   pre  - the next backward gather is issued when the current backward step starts computing
//   post - it is issued when the current step's compute ends, before its gradient reduction
//   none - it is issued when its own step needs it, behind the current step's reduction
// A fused recompute that keeps its gather for the backward that follows prefetches nothing
// (as in the simulator: at most two gathered units are in flight).
#pragma once

#include <string_view>

namespace osdp::validate {

enum class BackwardPrefetch { pre, post, none };

constexpr std::string_view backward_prefetch_name(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::pre:
      return "pre";
    case BackwardPrefetch::post:
      return "post";
    case BackwardPrefetch::none:
      return "none";
  }
  return "pre";
}

}  // namespace osdp::validate
