#include "sim/options.hpp"

namespace osdp::sim {

std::string_view granularity_name(Granularity granularity) {
  switch (granularity) {
    case Granularity::step:
      return "step";
    case Granularity::scale:
      return "scale";
    case Granularity::automatic:
      return "auto";
  }
  return "?";
}

Granularity resolve_granularity(Granularity granularity, int ranks) {
  if (granularity != Granularity::automatic) return granularity;
  return ranks <= auto_step_max_ranks ? Granularity::step : Granularity::scale;
}

SimOptions read_sim_options(const Json& simulation, const std::string& file,
                            const std::string& path) {
  SimOptions options;
  if (simulation.is_null()) return options;
  if (!simulation.is_object()) {
    throw InputError(file, path, render_value(simulation), "an object of simulator options");
  }
  const JsonReader reader(simulation, file, path);
  reader.require_only({"collectives", "forward_prefetch", "backward_prefetch", "units_in_flight",
                       "separate_reduce_scatter_lane", "gradient_all_reduce", "overlap_slowdown",
                       "kernel_launch", "network"});
  if (reader.has("collectives")) {
    const std::string name = reader.choice("collectives", {"auto", "step", "scale"});
    options.granularity = name == "step"    ? Granularity::step
                          : name == "scale" ? Granularity::scale
                                            : Granularity::automatic;
  }
  options.forward_prefetch =
      static_cast<int>(reader.optional_integer("forward_prefetch", 0, 64).value_or(1));
  options.backward_prefetch = read_backward_prefetch(reader, "backward_prefetch");
  options.units_in_flight =
      static_cast<int>(reader.optional_integer("units_in_flight", 1, 1 << 20).value_or(2));
  options.separate_reduce_scatter_lane =
      reader.optional_boolean("separate_reduce_scatter_lane").value_or(false);
  if (reader.has("gradient_all_reduce")) {
    options.gradient_all_reduce =
        reader.choice("gradient_all_reduce", {"per_operator", "after_backward"}) == "per_operator"
            ? GradientAllReduce::per_operator
            : GradientAllReduce::after_backward;
  }
  if (reader.has("overlap_slowdown")) {
    options.overlap_slowdown = reader.number("overlap_slowdown");
    if (*options.overlap_slowdown < 1.0) reader.fail("overlap_slowdown", "a factor of 1 or more");
  }
  options.kernel_launch_s =
      reader.optional_quantity("kernel_launch", units::Dimension::seconds, false);
  if (reader.has("network")) {
    const JsonReader network = reader.object("network");
    network.require_only({"model", "crosstraffic", "tcp_gamma"});
    if (network.has("model")) options.network.model = network.choice("model", {"CM02", "LV08"});
    options.network.crosstraffic = network.optional_boolean("crosstraffic").value_or(false);
    options.network.tcp_gamma = network.optional_non_negative_number("tcp_gamma").value_or(0.0);
  }
  return options;
}

}  // namespace osdp::sim
