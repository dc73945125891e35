// Loading a cluster from JSON in tests: the cluster, or the message of the InputError it raises.
#pragma once

#include <string>

#include "model/scenario.hpp"

namespace osdp::test {

inline Cluster load_cluster_json(const Json& cluster) {
  return load_cluster(JsonReader(cluster, "cluster.json"));
}

// The message of the InputError that loading raises ("" when none).
inline std::string cluster_error(const Json& cluster) {
  try {
    (void)load_cluster_json(cluster);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

}  // namespace osdp::test
