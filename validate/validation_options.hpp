// The scenario's "validation" object: how the validator runs plans for real.
//   {"batch_size": 4, "warmup_iterations": 2, "iterations": 9, "rounds": 3, "seed": 1,
//    "learning_rate": 1e-3, "collective_timeout": "30s", "prefetch_depth": 1, "device": "cpu",
//    "layouts": "tp2,pp2:gpipe"}
// Every key is optional; unknown keys are InputErrors. prefetch_depth defaults to the
// scenario's "simulation"."forward_prefetch" when that is set (else 1). The backward prefetch
// policy is the simulator's "simulation"."backward_prefetch" ("pre", "post" or "none"; default
// "pre"), with no key of its own here: one setting drives both sides. "device": "cuda" runs
// each rank on cuda:LOCAL_RANK over NCCL (a build with -DOSDP_WITH_CUDA=ON). Gradient
// accumulation is the scenario's "training"."accumulation_steps", with no key here either: the
// runtime runs that many micro-batches of batch_size per optimizer step, as the simulator does.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "model/prefetch_policy.hpp"
#include "model/scenario.hpp"
#include "validate/device_kind.hpp"
#include "validate/gpt_shape.hpp"

namespace osdp::validate {

struct ValidationOptions {
  // One micro-batch per rank, for strategies and the search (a --plan file brings its own).
  int batch_size = 4;
  int accumulation_steps = 1;  // micro-batches per optimizer step (training.accumulation_steps)
  int warmup_iterations = 2;
  // Measured iterations per plan, the median and middle half reported. The plans take turns
  // in `rounds` rounds (A B C .. A B C ..), each round a fresh model, its first iteration(s)
  // unmeasured (the first round `warmup_iterations`, later rounds one), so that a machine
  // whose speed drifts during the run slows every plan alike.
  int iterations = 9;
  int rounds = 3;
  std::uint64_t seed = 1;
  double learning_rate = 1e-3;
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(30)};
  int prefetch_depth = 1;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  // The DP gradients in one bucket all-reduced after the last backward (the simulator's
  // "gradient_all_reduce": "after_backward", as DDP's 25 MB buckets are for a model below
  // that size), instead of each operator's after its own backward ("per_operator").
  bool dp_all_reduce_after_backward = false;
  DeviceKind device = DeviceKind::cpu;
  // The cluster's speed reference probe (SpeedReference in model/cluster.hpp), timed alone
  // before and after the plans beside the compute check; unset: none. Set by `osdp validate`
  // and the fidelity benchmark from the cluster, never read from a scenario.
  std::optional<GptShape> speed_probe;
  int speed_probe_batch_size = 0;
  // Tensor x pipeline x data layouts to run beside the plans (cli/validate_layouts: "tp2,
  // pp2:gpipe:m4, tp2xdp2"); `--layouts` replaces it. The front end's: not sent to the runtime.
  std::string layouts;
};

ValidationOptions read_validation_options(const Scenario& scenario);
// The command line's measured iterations (`iterations` > 0) and rounds (`rounds` > 0) in place
// of the scenario's; new iterations without rounds keep the rounds at most the iterations.
// Throws InputError on `--rounds` when the rounds exceed the iterations.
void override_measured_iterations(ValidationOptions& options, int iterations, int rounds);
// The cluster's speed reference probe (model/cluster.hpp SpeedReference) into the options'
// speed_probe and its batch size; none without one.
void set_speed_probe(ValidationOptions& options, const Cluster& cluster);

Json validation_options_to_json(const ValidationOptions& options);

}  // namespace osdp::validate
