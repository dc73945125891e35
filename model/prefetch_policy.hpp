// FSDP's BackwardPrefetch: when the gather of the next backward unit may start. The scenario's
// "simulation"."backward_prefetch" sets it for the simulator and the validator's runtime alike
// (one source of truth), so a measured run and its simulation issue the same gathers at the
// same points.
//   pre  - when the current unit's backward compute starts; issued before its reduce-scatter
//   post - when the current unit's backward compute ends; issued before its reduce-scatter
//   none - when the next unit needs it; queued after the current unit's reduce-scatter
// A fused recompute that keeps its gather for the backward that follows prefetches nothing (at
// most two gathered units are in flight).
#pragma once

#include <string>
#include <string_view>

#include "model/json_reader.hpp"

namespace osdp {

enum class BackwardPrefetch { pre, post, none };

std::string_view backward_prefetch_name(BackwardPrefetch prefetch);

// Reads `key` of `reader` ("pre", "post" or "none"); InputError otherwise. `pre` when absent.
BackwardPrefetch read_backward_prefetch(const JsonReader& reader, const std::string& key);

}  // namespace osdp
