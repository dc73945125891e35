#include "model/prefetch_policy.hpp"

namespace osdp {

std::string_view backward_prefetch_name(BackwardPrefetch prefetch) {
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

BackwardPrefetch read_backward_prefetch(const JsonReader& reader, const std::string& key) {
  if (!reader.has(key)) return BackwardPrefetch::pre;
  const std::string name = reader.choice(key, {"pre", "post", "none"});
  return name == "post"   ? BackwardPrefetch::post
         : name == "none" ? BackwardPrefetch::none
                          : BackwardPrefetch::pre;
}

}  // namespace osdp
