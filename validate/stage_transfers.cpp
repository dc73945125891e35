#include "validate/stage_transfers.hpp"

#include <chrono>
#include <stdexcept>

namespace osdp::validate {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StageTransfers::StageTransfers(Communicator& communicator, StageTransferSetup setup, double& wait_s)
    : communicator_(communicator), setup_(std::move(setup)), wait_s_(wait_s) {
  expected_from_.resize(setup_.stages);
  received_from_.assign(setup_.stages, 0);
  for (int peer = 0; peer < setup_.stages; ++peer) {
    if (peer == setup_.stage) continue;  // handed over in memory, in this stage's own order
    for (const PipelineStep& step : stage_order(
             setup_.schedule, setup_.stages, setup_.chunks_per_stage, setup_.micro_batches, peer)) {
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
  sends_.push_back(communicator_.send(value.detach().contiguous(), setup_.pipeline_group[to]));
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
  const auto start = std::chrono::steady_clock::now();
  while (arrived_.find(wanted) == arrived_.end()) {
    const std::vector<Message>& expected = expected_from_[from];
    if (from == setup_.stage || received_from_[from] >= expected.size()) {
      throw std::logic_error("pipeline transfer asked for before its producer ran");
    }
    at::Tensor incoming = at::empty(setup_.message_shape);
    communicator_.receive(incoming, setup_.pipeline_group[from]);
    arrived_.emplace(expected[received_from_[from]++], incoming);
  }
  const double waited_s = seconds_since(start);
  wait_s_ += waited_s;
  receive_wait_s_ += waited_s;
  const auto found = arrived_.find(wanted);
  at::Tensor value = std::move(found->second);
  arrived_.erase(found);
  return value;
}

void StageTransfers::wait_for_sends() {
  const auto start = std::chrono::steady_clock::now();
  for (const CommHandle& send : sends_) send.wait();
  sends_.clear();
  wait_s_ += seconds_since(start);
}

}  // namespace osdp::validate
