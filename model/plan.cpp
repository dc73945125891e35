#include "model/plan.hpp"

#include <fmt/format.h>

namespace osdp {

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::dp:
      return "dp";
    case Mode::zdp:
      return "zdp";
    case Mode::z2:
      return "z2";
    case Mode::hsdp:
      return "hsdp";
  }
  return "?";
}

std::optional<Mode> mode_from_name(std::string_view name) {
  for (Mode mode : {Mode::dp, Mode::zdp, Mode::z2, Mode::hsdp}) {
    if (mode_name(mode) == name) return mode;
  }
  return std::nullopt;
}

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
    text = choice.mode == Mode::dp
               ? fmt::format("dp x{}", choice.slices)
               : fmt::format("{} {}/{}", mode_name(choice.mode), choice.sharded_slices,
                             choice.slices);
  }
  if (choice.checkpoint == Checkpoint::unfused) text += "+ckpt";
  if (choice.checkpoint == Checkpoint::fused) text += "+fused-ckpt";
  return text;
}

}  // namespace osdp
