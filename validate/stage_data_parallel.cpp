#include "validate/stage_data_parallel.hpp"

#include <c10/util/accumulate.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "validate/tensor_storage.hpp"

namespace osdp::validate {

StageOperator stage_operator_of(const std::string& name) {
  StageOperator op;
  if (name.starts_with("embedding.")) {
    op.prefix = "embedding.";
  } else if (name.starts_with("head.")) {
    op.kind = StageOperator::Kind::head;
    op.prefix = "head.";
  } else {
    // "layer<L>.attention.<tensor>" or "layer<L>.mlp.<tensor>"
    const std::size_t layer_end = name.find('.');
    op.layer = std::stoi(name.substr(5, layer_end - 5));
    op.prefix = name.substr(0, name.find('.', layer_end + 1) + 1);
    op.kind =
        op.prefix.ends_with(".mlp.") ? StageOperator::Kind::mlp : StageOperator::Kind::attention;
  }
  return op;
}

StageDataParallel::StageDataParallel(StageParameters& parameters, Communicator& comm,
                                     std::vector<int> data_group, Mode mode,
                                     const std::vector<int>& zdp_layers, WaitLog& waits)
    : parameters_(parameters),
      comm_(comm),
      data_group_(std::move(data_group)),
      mode_(mode),
      waits_(waits) {
  mark_sharded_operators(zdp_layers);
  shard_operator_parameters();
  if (sharded_optimizer()) share_flat_parameters();
}

// Which operators shard their parameters (z2: all; a ZDP layer's attention and MLP under any
// mode) and which leaves the bucket holds; with one data-parallel rank nothing is sharded.
void StageDataParallel::mark_sharded_operators(const std::vector<int>& zdp_layers) {
  const bool sharding = data_group_.size() > 1;
  for (StageOperator& op : parameters_.operators) {
    op.every_pass = sharding && op.layer >= 0 &&
                    std::find(zdp_layers.begin(), zdp_layers.end(), op.layer) != zdp_layers.end();
    op.sharded = sharding && (mode_ == Mode::z2 || op.every_pass);
    if (!op.sharded)
      bucket_leaves_.insert(bucket_leaves_.end(), op.leaves.begin(), op.leaves.end());
  }
  // The bucket in the tensors' order (operators are, and their leaves within them).
  std::sort(bucket_leaves_.begin(), bucket_leaves_.end());
}

// Each sharded operator keeps this rank's 1/d of its flat parameters and a gradient accumulator
// of that size; the whole parameters exist only while gathered.
void StageDataParallel::shard_operator_parameters() {
  for (StageOperator& op : parameters_.operators) {
    if (!op.sharded) continue;
    int64_t numel = 0;
    for (int leaf : op.leaves) numel += parameters_.tensors[leaf].second.numel();
    op.padded_numel = (numel + ranks() - 1) / ranks() * ranks();
    at::Tensor flat = at::zeros({op.padded_numel});
    int64_t offset = 0;
    for (int leaf : op.leaves) {
      at::Tensor& tensor = parameters_.tensors[leaf].second;
      flat.narrow(0, offset, tensor.numel()).copy_(tensor.detach().reshape({-1}));
      offset += tensor.numel();
      tensor = at::Tensor();  // gathered before each step's first micro-batch
    }
    const int64_t chunk = op.padded_numel / ranks();
    op.shard = flat.narrow(0, data_index() * chunk, chunk).clone().set_requires_grad(true);
    op.shard.mutable_grad() = at::zeros_like(op.shard);
  }
}

// z1: the parameters live in one flat buffer (the bucket's layout), and the optimizer sees only
// this rank's chunk of it: its update lands in the parameters, and the all-gather of the chunks
// fills the buffer in place (no copy of the parameters).
void StageDataParallel::share_flat_parameters() {
  parameter_buffer_ = flat_parameters();
  int64_t offset = 0;
  for (int leaf : bucket_leaves_) {
    at::Tensor& tensor = parameters_.tensors[leaf].second;
    tensor = parameter_buffer_.narrow(0, offset, tensor.numel())
                 .view(tensor.sizes())
                 .set_requires_grad(true);
    offset += tensor.numel();
  }
  const int64_t chunk = parameter_buffer_.numel() / ranks();
  optimizer_shard_ =
      parameter_buffer_.narrow(0, data_index() * chunk, chunk).set_requires_grad(true);
}

std::vector<at::Tensor> StageDataParallel::optimizer_parameters() const {
  std::vector<at::Tensor> updated;
  for (const StageOperator& op : parameters_.operators) {
    if (op.sharded) updated.push_back(op.shard);
  }
  if (sharded_optimizer()) {
    updated.push_back(optimizer_shard_);
  } else {
    for (int leaf : bucket_leaves_) updated.push_back(parameters_.tensors[leaf].second);
  }
  return updated;
}

void StageDataParallel::start_step() {
  if (shards_parameters()) {
    for (StageOperator& op : parameters_.operators) {
      if (op.sharded) op.shard.mutable_grad().zero_();
    }
    gather_parameters(/*with_zdp=*/false);
  }
  fresh_gradients();
}

// dp and z1: the bucket leaves' gradients, zeroed for the step. With data parallelism, views of
// one flat bucket (DDP's, larger than the model) that the backward accumulates into and the
// reduction sums in place, so that no gradient is copied.
void StageDataParallel::fresh_gradients() {
  if (ranks() == 1) {
    for (auto& [name, tensor] : parameters_.tensors) {
      if (tensor.grad().defined()) {
        tensor.mutable_grad().zero_();
      } else {
        tensor.mutable_grad() = at::zeros_like(tensor);
      }
    }
    return;
  }
  // The bucket is zeroed in place from the second step on: a new one beside the old (which the
  // gradients still view) would hold the gradients twice.
  if (gradient_bucket_.defined()) {
    gradient_bucket_.zero_();
    return;
  }
  if (bucket_leaves_.empty()) return;
  gradient_bucket_ = at::zeros({padded_parameter_count()});
  int64_t offset = 0;
  for (int leaf : bucket_leaves_) {
    at::Tensor& tensor = parameters_.tensors[leaf].second;
    tensor.mutable_grad() = gradient_bucket_.narrow(0, offset, tensor.numel()).view(tensor.sizes());
    offset += tensor.numel();
  }
}

void StageDataParallel::begin_backward(int index) {
  StageOperator& op = parameters_.operators[index];
  if (!op.sharded) return;
  op.gradient_flat = at::zeros({op.padded_numel});
  int64_t offset = 0;
  for (int leaf : op.leaves) {
    at::Tensor& tensor = parameters_.tensors[leaf].second;
    tensor.mutable_grad() = op.gradient_flat.narrow(0, offset, tensor.numel()).view(tensor.sizes());
    offset += tensor.numel();
  }
}

// This rank's chunk of the sum is added to its accumulator and the whole buffer dropped as soon
// as the reduction ends (on the communication thread). One reduction in flight at a time: the
// previous one is waited for first, so that buffers do not pile up while the communication
// thread is busy with the pipeline's transfers (they did: a pp 2 x dp 2 step peaked 26 % above
// the model, and z2's peak varied 9 % from run to run).
void StageDataParallel::end_backward(int index) {
  StageOperator& op = parameters_.operators[index];
  if (!op.sharded) return;
  if (!gradient_reductions_.empty()) {
    waits_.wait_for(WaitCause::data_parallel, gradient_reductions_.back());
  }
  for (int leaf : op.leaves) parameters_.tensors[leaf].second.mutable_grad() = at::Tensor();
  const int64_t chunk = op.padded_numel / ranks();
  const int64_t mine = data_index() * chunk;
  auto flat = std::make_shared<at::Tensor>(std::move(op.gradient_flat));
  at::Tensor accumulator = op.shard.grad();
  gradient_reductions_.push_back(comm_.start(CollectiveKind::reduce_scatter, *flat, data_group_,
                                             [flat, accumulator, mine, chunk]() mutable {
                                               accumulator.add_(flat->narrow(0, mine, chunk));
                                               *flat = at::Tensor();
                                             }));
}

// Sharded: the operators' whole parameters, all-gathered from the shards (each shard becomes its
// own chunk of the whole, so the shard is not held twice), the leaves views of them. ZDP
// operators get their buffer and leaves but no data: each pass gathers them (before_pass);
// `with_zdp` gathers them too (to read the whole parameters). One all-gather for all the
// operators, as the 3D model's bucket (a flat parameter's): on CPU ranks ten queued gathers of a
// 4-layer GPT took 15-35 ms where one of their bytes takes 6 (bench/sync_probe --queue).
void StageDataParallel::gather_parameters(bool with_zdp) {
  std::vector<at::Tensor> gathered;
  for (StageOperator& op : parameters_.operators) {
    if (!op.sharded) continue;
    const int64_t chunk = op.padded_numel / ranks();
    op.gathered = at::empty({op.padded_numel});
    if (op.every_pass && !with_zdp) {
      // Its buffer and leaves only, the storage freed at once (one operator's at a time); its
      // shard keeps storage of its own.
      make_leaves(op);
      free_storage(op.gathered);
      continue;
    }
    at::Tensor slot = op.gathered.narrow(0, data_index() * chunk, chunk);
    slot.copy_(op.shard.detach());
    if (!op.every_pass) {
      torch::NoGradGuard no_grad;
      op.shard.set_(slot);
    }
    gathered.push_back(op.gathered);
  }
  if (!gathered.empty()) {
    waits_.wait_for(WaitCause::data_parallel, comm_.start_all_gather(gathered, data_group_));
  }
  for (StageOperator& op : parameters_.operators) {
    if (op.sharded && (!op.every_pass || with_zdp)) make_leaves(op);
  }
}

// The operator's parameters as views of its whole buffer.
void StageDataParallel::make_leaves(StageOperator& op) {
  int64_t offset = 0;
  for (int leaf : op.leaves) {
    at::Tensor& tensor = parameters_.tensors[leaf].second;
    const std::vector<int64_t>& sizes = parameters_.sizes[leaf];
    const int64_t numel = c10::multiply_integers(sizes);
    tensor = op.gathered.narrow(0, offset, numel).view(sizes).set_requires_grad(true);
    offset += numel;
  }
}

// Starts a ZDP operator's all-gather for its next pass: its buffer's storage allocated again and
// filled from the shards (the leaves, views of the buffer, see the data again). Issued one
// operator ahead of the compute (FSDP's prefetch; at most two whole buffers at once).
void StageDataParallel::start_pass_gather(StageOperator& op) {
  if (!op.every_pass || op.pass_gather.valid()) return;
  allocate_storage(op.gathered);
  const int64_t chunk = op.padded_numel / ranks();
  // Unversioned: autograd's saved views of the buffer (this micro-batch's forward) check that
  // nothing wrote to it since; the refill brings back the same values.
  copy_unversioned(op.gathered.narrow(0, data_index() * chunk, chunk), op.shard.detach());
  op.pass_gather = comm_.start(CollectiveKind::all_gather, op.gathered, data_group_);
}

void StageDataParallel::before_pass(int index, int next) {
  StageOperator& op = parameters_.operators[index];
  if (!op.every_pass) {
    if (next >= 0) start_pass_gather(parameters_.operators[next]);
    return;
  }
  start_pass_gather(op);
  if (next >= 0) start_pass_gather(parameters_.operators[next]);
  waits_.wait_for(WaitCause::data_parallel, op.pass_gather);
  op.pass_gather = CommHandle();
}

void StageDataParallel::after_pass(int index) {
  StageOperator& op = parameters_.operators[index];
  if (op.every_pass) free_storage(op.gathered);
}

// Sharded: the shards move out of the whole parameters into storage of their own, and the whole
// parameters are freed.
void StageDataParallel::release_whole_parameters() {
  for (StageOperator& op : parameters_.operators) {
    if (!op.sharded) continue;
    {
      torch::NoGradGuard no_grad;
      op.shard.set_(op.shard.detach().clone());
    }
    for (int leaf : op.leaves) parameters_.tensors[leaf].second = at::Tensor();
    op.gathered = at::Tensor();
  }
}

void StageDataParallel::end_micro_batches() {
  // Sharded operators (z2's) keep the whole parameters to the last backward only.
  if (shards_parameters()) release_whole_parameters();
}

void StageDataParallel::gather_whole_parameters() {
  if (shards_parameters()) gather_parameters(/*with_zdp=*/true);
}

void StageDataParallel::reduce_gradients() {
  if (ranks() == 1) return;
  if (shards_parameters()) {
    waits_.wait_for(WaitCause::data_parallel, gradient_reductions_);
    gradient_reductions_.clear();
    for (StageOperator& op : parameters_.operators) {
      if (op.sharded) op.shard.mutable_grad().div_(ranks());
    }
  }
  if (bucket_leaves_.empty()) return;
  if (sharded_optimizer()) {
    // Only this rank's chunk is summed: the optimizer updates that chunk alone.
    waits_.wait_for(WaitCause::data_parallel,
                    comm_.start(CollectiveKind::reduce_scatter, gradient_bucket_, data_group_));
    const int64_t chunk = gradient_bucket_.numel() / ranks();
    optimizer_shard_.mutable_grad() =
        gradient_bucket_.narrow(0, data_index() * chunk, chunk).div_(ranks());
    return;
  }
  waits_.wait_for(WaitCause::data_parallel,
                  comm_.start(CollectiveKind::all_reduce, gradient_bucket_, data_group_));
  gradient_bucket_.div_(ranks());
}

void StageDataParallel::after_optimizer_step() {
  if (!sharded_optimizer()) return;
  waits_.wait_for(WaitCause::data_parallel,
                  comm_.start(CollectiveKind::all_gather, parameter_buffer_, data_group_));
}

// z1 with a bucket on this rank (a stage of ZDP layers only has none).
bool StageDataParallel::sharded_optimizer() const {
  return mode_ == Mode::z1 && ranks() > 1 && !bucket_leaves_.empty();
}

bool StageDataParallel::shards_parameters() const {
  return std::any_of(parameters_.operators.begin(), parameters_.operators.end(),
                     [](const StageOperator& op) { return op.sharded; });
}

int StageDataParallel::data_index() const { return group_index(data_group_, comm_.rank()); }

int64_t StageDataParallel::padded_parameter_count() const {
  int64_t total = 0;
  for (int leaf : bucket_leaves_) total += parameters_.tensors[leaf].second.numel();
  return (total + ranks() - 1) / ranks() * ranks();
}

// The bucket's parameters flat, in its order, padded as it is.
at::Tensor StageDataParallel::flat_parameters() const {
  at::Tensor flat = at::zeros({padded_parameter_count()});
  int64_t offset = 0;
  for (int leaf : bucket_leaves_) {
    const at::Tensor& tensor = parameters_.tensors[leaf].second;
    flat.narrow(0, offset, tensor.numel()).copy_(tensor.detach().reshape({-1}));
    offset += tensor.numel();
  }
  return flat;
}

}  // namespace osdp::validate
