#include "validate/tensor_storage.hpp"

#include <ATen/core/LegacyTypeDispatch.h>

#include "validate/counting_allocator.hpp"

namespace osdp::validate {

void allocate_storage(at::Tensor& tensor) {
  at::Tensor fresh = at::empty({tensor.numel()}, tensor.options().requires_grad(false));
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(
      fresh.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(nullptr, tensor.device())));
  storage->set_nbytes(fresh.nbytes());
}

void free_storage(at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

void copy_unversioned(at::Tensor destination, const at::Tensor& source) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  destination.copy_(source);
}

at::Tensor host_zeros(std::int64_t numel) {
  HostArenaScope arena;
  return at::zeros({numel}, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor host_copy(const at::Tensor& values) {
  HostArenaScope arena;
  return values.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace osdp::validate
