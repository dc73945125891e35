#include "validate/stage_transfers.hpp"

#include <algorithm>
#include <stdexcept>

namespace osdp::validate {
StageTransfers::StageTransfers(Communicator& communicator, StageTransferSetup setup, WaitLog& waits)
    : communicator_(communicator), setup_(std::move(setup)), waits_(waits) {
  expected_from_.resize(setup_.stages);
  received_from_.assign(setup_.stages, 0);
  position_on_.resize(setup_.stages);
  for (int peer = 0; peer < setup_.stages; ++peer) {
    if (peer == setup_.stage) continue;  // handed over in memory, in this stage's own order
    int position = 0;
    for (const PipelineStep& step : stage_order(
             setup_.schedule, setup_.stages, setup_.chunks_per_stage, setup_.micro_batches, peer)) {
      position_on_[peer][{step.chunk, step.micro_batch, step.pass == Pass::backward}] = position++;
      const int consumer = consumer_of(step);
      if (consumer >= 0 && stage_of_chunk(consumer) == setup_.stage) {
        expected_from_[peer].emplace_back(step.chunk, step.micro_batch,
                                          step.pass == Pass::backward);
      }
    }
  }
}

int StageTransfers::consumer_of(const PipelineStep& step) const {
  if (step.pass == Pass::forward) return step.chunk + 1 < chunks() ? step.chunk + 1 : -1;
  return step.chunk > 0 ? step.chunk - 1 : -1;
}

void StageTransfers::send(const PipelineStep& step, const at::Tensor& value) {
  const int consumer = consumer_of(step);
  if (consumer < 0) return;
  const Message message{step.chunk, step.micro_batch, step.pass == Pass::backward};
  const int to = stage_of_chunk(consumer);
  if (to == setup_.stage) {
    arrived_.emplace(message, value.detach());
    return;
  }
  // The peer's pass that takes it: the consumer chunk's pass of the same kind and micro-batch.
  const int taken_at = position_on_[to].at({consumer, step.micro_batch, message_backward(message)});
  sends_.push_back(
      {communicator_.send(value.detach().contiguous(), setup_.pipeline_group[to]), to, taken_at});
  most_sends_in_flight_ = std::max(most_sends_in_flight_, static_cast<int>(sends_.size()));
}

void StageTransfers::release_sends_taken(int peer, int position) {
  std::erase_if(sends_, [&](const PendingSend& sent) {
    if (sent.peer != peer || sent.taken_at > position) return false;
    sent.handle.wait();  // received already: returns at once (and surfaces a failure)
    return true;
  });
}

at::Tensor StageTransfers::receive(const PipelineStep& step) {
  const bool backward = step.pass == Pass::backward;
  const int producer = backward ? step.chunk + 1 : step.chunk - 1;
  if (producer < 0 || producer >= chunks()) {
    throw std::logic_error("a pass that receives nothing asked for a transfer");
  }
  // The producer's pass: a forward's input is the previous chunk's forward, a backward's
  // gradient the next chunk's backward.
  const Message wanted{producer, step.micro_batch, backward};
  const int from = stage_of_chunk(producer);
  waits_.timed(WaitCause::receive, [&] {
    while (arrived_.find(wanted) == arrived_.end()) {
      const std::vector<Message>& expected = expected_from_[from];
      if (from == setup_.stage || received_from_[from] >= expected.size()) {
        throw std::logic_error("pipeline transfer asked for before its producer ran");
      }
      at::Tensor incoming = at::empty(setup_.message_shape);
      communicator_.receive(incoming, setup_.pipeline_group[from]);
      const Message& produced = expected[received_from_[from]++];
      arrived_.emplace(produced, incoming);
      // The peer ran every pass up to the one that produced this message: the sends those
      // passes took are done, and their tensors can go (Gloo's sends report done only once
      // waited for).
      release_sends_taken(from, position_on_[from].at(produced));
    }
  });
  const auto found = arrived_.find(wanted);
  at::Tensor value = std::move(found->second);
  arrived_.erase(found);
  return value;
}

void StageTransfers::wait_for_sends() {
  waits_.timed(WaitCause::send, [&] {
    for (const PendingSend& sent : sends_) sent.handle.wait();
  });
  sends_.clear();
}

}  // namespace osdp::validate
