// A cluster as JSON: read strictly (unknown keys, ranges, units; InputError naming the file and
// JSON path) and written back (what `osdp calibrate` and `osdp fit` produce).
#pragma once

#include "model/cluster.hpp"
#include "model/json_reader.hpp"

namespace osdp {

Cluster load_cluster(const JsonReader& reader);
Json cluster_to_json(const Cluster& cluster);
// A probe's shape as the cluster's speed reference writes it ({"layers", "hidden", ...}).
Json probe_shape_json(const ProbeShape& probe);

}  // namespace osdp
