// One compute thread per rank: each rank stands for one accelerator, and the ranks of a node
// share its cores, so neither ATen's pool nor the BLAS may start threads of its own.
#pragma once

namespace osdp::validate {

// ATen's intra-op pool and, when libtorch's BLAS is OpenBLAS, OpenBLAS's own thread server
// (whose idle workers spin in sched_yield and took a third of a core per rank here) set to one
// thread. Safe to call more than once.
void use_one_compute_thread();

// The cores this process may run on (its CPU affinity), which the node's ranks share.
int usable_cores();

}  // namespace osdp::validate
