#include "model/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "model/mode.hpp"

namespace osdp {

std::string_view checkpoint_name(Checkpoint checkpoint) {
  switch (checkpoint) {
    case Checkpoint::none:
      return "none";
    case Checkpoint::unfused:
      return "unfused";
    case Checkpoint::fused:
      return "fused";
  }
  return "?";
}

std::optional<Checkpoint> checkpoint_from_name(std::string_view name) {
  for (Checkpoint checkpoint : {Checkpoint::none, Checkpoint::unfused, Checkpoint::fused}) {
    if (checkpoint_name(checkpoint) == name) return checkpoint;
  }
  return std::nullopt;
}

std::string describe(const OperatorChoice& choice) {
  std::string text(mode_name(choice.mode));
  if (choice.slices > 1) {
    text = choice.mode == Mode::dp ? fmt::format("dp x{}", choice.slices)
                                   : fmt::format("{} {}/{}", mode_name(choice.mode),
                                                 choice.sharded_slices, choice.slices);
  }
  if (choice.checkpoint == Checkpoint::unfused) text += "+ckpt";
  if (choice.checkpoint == Checkpoint::fused) text += "+fused-ckpt";
  if (choice.offload) text += "+offload";
  return text;
}

int finest_split(const Plan& plan) {
  int finest = 1;
  for (const OperatorChoice& choice : plan.choices) finest = std::max(finest, choice.slices);
  return finest;
}

}  // namespace osdp
