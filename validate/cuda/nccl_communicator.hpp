// The NCCL backend of Communicator (validate/communicator.hpp), compiled only with
// OSDP_WITH_CUDA. This header names no CUDA type.
#pragma once

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "validate/communicator.hpp"

namespace osdp::validate {

// Ranks over ProcessGroupNCCL on cuda:`options.cuda_device`, through `store`. Sub-groups (HSDP's
// shard and replica groups) get their own process group on first use, which every member
// reaches in the same order because every rank issues the same collectives in the same order.
std::unique_ptr<Communicator> connect_nccl(const ConnectOptions& options,
                                           c10::intrusive_ptr<c10d::Store> store);

}  // namespace osdp::validate
