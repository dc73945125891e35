// Tensor storage the sharded runtime manages by hand, as FSDP does for its flat parameters: a
// gathered buffer's storage is freed after use and allocated again before the next gather, the
// tensor object itself (which autograd's saved views share) staying the same; and host memory
// for offloaded states.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace osdp::validate {

// Gives `tensor` fresh storage from its device's allocator (the counting allocator on the CPU,
// the caching allocator on CUDA), keeping the tensor object that autograd's saved views share.
void allocate_storage(at::Tensor& tensor);

// Frees `tensor`'s storage: the memory really drops, and the views of it stay valid objects
// whose data is gone until allocate_storage.
void free_storage(at::Tensor& tensor);

// Copies without bumping the destination's version counter, which autograd checks on the views
// saved from an earlier phase (a gathered buffer is refilled with the same values).
void copy_unversioned(at::Tensor destination, const at::Tensor& source);

// Host memory for offloaded states: CPU tensors, counted in the host arena.
at::Tensor host_zeros(std::int64_t numel);
at::Tensor host_copy(const at::Tensor& values);

}  // namespace osdp::validate
