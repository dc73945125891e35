// One compute thread per rank: each rank stands for one accelerator, and the ranks of a node
// share its cores, so neither ATen's pool nor the BLAS may start threads of its own.
#pragma once

namespace osdp::validate {

// ATen's intra-op pool and, when libtorch's BLAS is OpenBLAS, OpenBLAS's own thread server
// (whose idle workers spin in sched_yield and took a third of a core per rank here) set to one
// thread. Safe to call more than once.
void use_one_compute_thread();

// On shared cores a computing thread at the communication threads' priority keeps its core
// until the scheduler's tick (4 ms at HZ=250) while a communication thread woken by a message
// waits: traces of the testbed showed collectives of 260 KB stalled 1-3 ms mid-way while both
// cores computed. Accelerators give communication its own engine (and PyTorch its collectives
// high-priority streams); here the calling thread, the rank's compute, is made nicer
// (by compute_nicer_by, at most to 19) than the threads that already exist (the communicator's
// and its transport's), so that a woken transport preempts compute sooner. On the testbed's
// kernel it often still waits for the tick while every core computes, which the simulator
// models (HostCores::scheduler_tick_s; SCHED_IDLE compute, tried, did not remove it). Call after
// connecting (threads started later by this one inherit its nice value). Raising one's own nice
// value is always permitted.
inline constexpr int compute_nicer_by = 10;
void let_communication_preempt_compute();

// The cores this process may run on (its CPU affinity), which the node's ranks share.
int usable_cores();

// The scheduler's tick (1/HZ), the resolution of the kernel's coarse clock, which advances
// once a tick: a woken thread that finds every core busy runs at a tick (model/cluster.hpp,
// HostCores). 0 where the clock gives none.
double scheduler_tick_s();

}  // namespace osdp::validate
