// The data-parallel side of one rank of a 3D layout (validate/parallel_gpt): how the rank's
// operators keep their parameters across its data-parallel group, and the collectives that keep
// the replicas alike.
//   sharded operators (every one under z2; the ZDP layers' attention and MLP under any mode):
//     this rank's 1/d of the flat parameters and a gradient accumulator of that size; the whole
//     parameters exist only while gathered, once a step for z2 (kept to the last backward) or
//     for each pass of a ZDP operator (freed after it, the next operator's gather issued one
//     ahead); each micro-batch's gradient is reduce-scattered into the accumulator as the
//     operator's backward ends.
//   the others: one flat gradient bucket (DDP's) all-reduced after the last micro-batch (dp),
//     or reduce-scattered, the optimizer updating this rank's chunk of the flat parameters and
//     the chunks all-gathered back into place (z1).
// With one data-parallel rank nothing is sharded and nothing reduced. (parameter_shards,
// gather_schedule and gradient_reduction do this for the data-parallel runtime, whose units are
// operator slices of whole tensors; here the tensors are tensor-parallel shards already.)
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/mode.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_parameters.hpp"
#include "validate/wait_log.hpp"

namespace osdp::validate {

// One operator of the GPT as the 3D model counts them (the embedding, a layer's attention, its
// MLP, the head with the loss): the unit a pass runs through, and the unit whose parameters are
// sharded, gathered and whose gradients are reduce-scattered together.
struct StageOperator {
  enum class Kind { embedding, attention, mlp, head } kind = Kind::embedding;
  int layer = -1;
  std::string prefix;       // of its parameters' names: "embedding.", "layer2.mlp.", ...
  std::vector<int> leaves;  // its parameters: indices into StageParameters::tensors
  bool sharded = false;
  // Sharded: gathered for every pass and freed after it (a ZDP layer's), not once a step (z2).
  bool every_pass = false;
  // Sharded only. The flat parameters, padded to a multiple of d: this rank's 1/d, what the
  // optimizer updates (its gradient the reduce-scattered accumulator); while gathered a view of
  // the whole.
  int64_t padded_numel = 0;
  at::Tensor shard;
  // Whole: z2 from before the first micro-batch to the last backward; a ZDP operator only during
  // each pass, its storage freed between passes (the leaves, views of it, stay the same objects,
  // which autograd's saved tensors share).
  at::Tensor gathered;
  CommHandle pass_gather;    // a ZDP operator's all-gather for its next pass, in flight
  at::Tensor gradient_flat;  // one micro-batch's whole gradient, until it is reduce-scattered
};

// The operator a canonical parameter belongs to ("layer2.mlp.fc.weight": layer 2's MLP), with
// no leaves yet.
StageOperator stage_operator_of(const std::string& name);

// This rank's parameters (its tensor-parallel shards of its chunks' tensors), grouped by
// operator in model order.
struct StageParameters {
  NamedTensors tensors;
  std::vector<std::vector<int64_t>> sizes;  // of each (sharded ones are released between steps)
  std::vector<StageOperator> operators;
};

class StageDataParallel {
 public:
  // Shards what `mode` and `zdp_layers` say over `data_group` (global ranks, this rank among
  // them). `parameters` and `waits` (where the compute's waits for the group go) must outlive
  // this object.
  StageDataParallel(StageParameters& parameters, Communicator& comm, std::vector<int> data_group,
                    Mode mode, const std::vector<int>& zdp_layers, WaitLog& waits);

  // What the optimizer updates: the sharded operators' shards and the bucket's parameters (z1:
  // this rank's chunk of them). Adam is elementwise, so their split does not change the update.
  std::vector<at::Tensor> optimizer_parameters() const;

  // Before the first micro-batch: fresh gradients, and z2's whole parameters gathered.
  void start_step();
  // Before a pass through operator `op`: its gather done (a ZDP operator's, started now if not
  // yet), and the next operator's (`next`, -1: none) started.
  void before_pass(int op, int next);
  // After a ZDP operator's pass: its whole parameters' memory returned.
  void after_pass(int op);
  // Around a sharded operator's backward: its gradients land in one flat buffer, which is
  // reduce-scattered into the accumulator when the backward ends.
  void begin_backward(int op);
  void end_backward(int op);
  // After the last micro-batch: z2's whole parameters freed, then the gradients averaged over
  // the group (the bucket all-reduced or, z1, reduce-scattered).
  void end_micro_batches();
  void reduce_gradients();
  // After the optimizer step: z1's updated chunks gathered into the parameters.
  void after_optimizer_step();
  // The whole parameters of every operator gathered to be read (full_parameters), and released
  // again.
  void gather_whole_parameters();
  void release_whole_parameters();

  bool shards_parameters() const;
  int data_index() const;
  int64_t ranks() const { return static_cast<int64_t>(data_group_.size()); }

 private:
  void mark_sharded_operators(const std::vector<int>& zdp_layers);
  void shard_operator_parameters();
  void share_flat_parameters();
  void fresh_gradients();
  void gather_parameters(bool with_zdp);
  void make_leaves(StageOperator& op);
  void start_pass_gather(StageOperator& op);
  bool sharded_optimizer() const;
  int64_t padded_parameter_count() const;
  at::Tensor flat_parameters() const;

  StageParameters& parameters_;
  Communicator& comm_;
  std::vector<int> data_group_;
  Mode mode_ = Mode::dp;
  WaitLog& waits_;
  // The leaves of the operators not sharded (all of them with one data-parallel rank), in order:
  // dp's and z1's flat bucket.
  std::vector<int> bucket_leaves_;
  at::Tensor gradient_bucket_;   // dp and z1: the bucket leaves' gradients, flat
  at::Tensor parameter_buffer_;  // z1: the bucket leaves, flat (the leaves are views of it)
  at::Tensor optimizer_shard_;   // z1: this rank's chunk of it, what the optimizer updates
  std::vector<CommHandle> gradient_reductions_;  // sharded operators' reduce-scatters in flight
};

}  // namespace osdp::validate
