// The point-to-point messages of a pipeline step between model chunks: each forward's
// activations go to the next chunk, each backward's input gradient to the previous one. Chunk c
// runs on stage c mod p (Megatron's interleaving: chunk k of stage r is virtual stage k p + r),
// so the neighbour may be another stage or, wrapping around with one stage, this one (then the
// tensor is handed over in memory).
//
// The communicator pairs the k-th send to a peer with the peer's k-th receive from this rank (no
// tags per message). Under interleaving a stage's sends to a peer (activations of one chunk,
// gradients of another) need not come in the order the peer consumes them, so a receive takes
// the peer's messages in the peer's own order, which every rank knows from
// model/pipeline_schedule's stage_order, and keeps the ones that came early until their pass
// asks for them. Sends never block (their completion is waited for only where it is certain:
// once the receiver has sent something from a later pass, and at the end), so a receive waits
// only for passes the peer runs before the one it needs: no deadlock that the schedule itself
// does not have. A sent tensor is let go as soon as it is known received, so that a stage holds
// the activations its schedule keeps in flight, not every micro-batch's it has sent.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "model/pipeline_schedule.hpp"
#include "validate/communicator.hpp"
#include "validate/wait_log.hpp"

namespace osdp::validate {

struct StageTransferSetup {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int stages = 1;
  int chunks_per_stage = 1;
  int micro_batches = 1;
  int stage = 0;                       // this rank's
  std::vector<int> pipeline_group;     // one rank per stage, in stage order
  std::vector<int64_t> message_shape;  // every message's: one micro-batch's activations
};

class StageTransfers {
 public:
  // `waits` (which must outlive this) gets the time spent blocked in receives (the pipeline's
  // bubble as this stage sees it: its neighbours' passes it waited for, and the transfers
  // themselves) and in the final wait for sends.
  StageTransfers(Communicator& communicator, StageTransferSetup setup, WaitLog& waits);

  // Hands what `step` produced on to the chunk that consumes it: a forward's output activations
  // (to chunk + 1), a backward's input gradient (to chunk - 1). Nothing for the last chunk's
  // forward (the loss) or the first chunk's backward.
  void send(const PipelineStep& step, const at::Tensor& value);
  // What `step` consumes from a neighbour: a forward's input activations (from chunk - 1), a
  // backward's output gradient (from chunk + 1). Blocks until it has arrived.
  at::Tensor receive(const PipelineStep& step);
  // Waits until every send has been received (the tensors may be freed after).
  void wait_for_sends();
  // The most sends this stage had in flight at once (their tensors held).
  int most_sends_in_flight() const { return most_sends_in_flight_; }

 private:
  // A message by the pass that produced it: (chunk, micro-batch, backward); a pass likewise.
  using Message = std::tuple<int, int, bool>;
  static bool message_backward(const Message& message) { return std::get<2>(message); }
  // A send in flight, with the position in its receiver's order of the pass that takes it.
  struct PendingSend {
    CommHandle handle;
    int peer = 0;
    int taken_at = 0;
  };
  // Waits for (and drops) the sends to `peer` taken by its passes up to `position`: they are
  // done once the peer's pass at `position` has sent this stage something.
  void release_sends_taken(int peer, int position);

  int stage_of_chunk(int chunk) const { return chunk % setup_.stages; }
  int chunks() const { return setup_.stages * setup_.chunks_per_stage; }
  // The chunk that consumes what `step` produced (-1: none).
  int consumer_of(const PipelineStep& step) const;

  Communicator& communicator_;
  StageTransferSetup setup_;
  WaitLog& waits_;
  int most_sends_in_flight_ = 0;
  // Per stage: the messages it sends to this rank, in the order it sends them; and how many of
  // them have been received.
  std::vector<std::vector<Message>> expected_from_;
  std::vector<std::size_t> received_from_;
  std::map<Message, at::Tensor> arrived_;  // received (or produced here) and not yet consumed
  // Per stage: each of its passes' position in its order.
  std::vector<std::map<Message, int>> position_on_;
  std::vector<PendingSend> sends_;
};

}  // namespace osdp::validate
