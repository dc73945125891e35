#include "model/pass_stream.hpp"

#include <algorithm>

namespace osdp {

PassStream::PassStream(double compute_slowdown, double communication_slowdown, double arrival_s)
    : compute_slowdown_(std::max(1.0, compute_slowdown)),
      communication_slowdown_(std::max(1.0, communication_slowdown)),
      arrival_s_(std::max(0.0, arrival_s)) {}

long PassStream::issue(double work_s) {
  const long id = next_id_++;
  if (work_s > 0) queue_.push_back({id, now_s_ + arrival_s_, work_s});
  return id;
}

// Work is queued and leaves in the order of its ids, so `id` is done once nothing queued is
// as old.
bool PassStream::done(long id) const { return queue_.empty() || queue_.front().id > id; }

// The first queued collective with the compute idle: once the ranks have issued it, at full
// speed.
void PassStream::run_head_alone() {
  const Work& head = queue_.front();
  now_s_ = std::max(now_s_, head.ready_s) + head.remaining_s;
  queue_.pop_front();
}

double PassStream::wait_for(long id) {
  const double start_s = now_s_;
  while (!done(id)) run_head_alone();
  return now_s_ - start_s;
}

// The compute beside the stream: while both run each goes at its slowed rate (a collective
// not yet issued by every rank runs nothing).
void PassStream::compute(double compute_s) {
  double remaining_s = compute_s;
  while (remaining_s > 0) {
    if (queue_.empty()) {
      now_s_ += remaining_s;
      return;
    }
    Work& head = queue_.front();
    if (head.ready_s > now_s_) {
      const double step_s = std::min(remaining_s, head.ready_s - now_s_);
      now_s_ += step_s;
      remaining_s -= step_s;
      continue;
    }
    const double compute_end_s = remaining_s * compute_slowdown_;
    const double head_end_s = head.remaining_s * communication_slowdown_;
    const double step_s = std::min(compute_end_s, head_end_s);
    now_s_ += step_s;
    remaining_s = step_s == compute_end_s ? 0.0 : remaining_s - step_s / compute_slowdown_;
    if (step_s == head_end_s) {
      queue_.pop_front();
    } else {
      head.remaining_s -= step_s / communication_slowdown_;
    }
  }
}

StreamedPassTime PassStream::run(const std::vector<StreamedOperator>& operators) {
  const double start_s = now_s_;
  double wait_s = 0;
  const int n = static_cast<int>(operators.size());
  std::vector<long> gathers(n, -1);
  const auto issue_gather = [&](int k) {
    if (k < n && operators[k].gather_s > 0 && gathers[k] < 0) {
      gathers[k] = issue(operators[k].gather_s);
    }
  };
  for (int k = 0; k < n; ++k) {
    issue_gather(k);
    issue_gather(k + 1);
    if (gathers[k] >= 0) wait_s += wait_for(gathers[k]);
    compute(operators[k].compute_s);
    if (operators[k].reduce_s > 0) {
      if (last_reduction_ >= 0) wait_s += wait_for(last_reduction_);
      last_reduction_ = issue(operators[k].reduce_s);
    }
  }
  return {now_s_ - start_s, wait_s};
}

double PassStream::drain_s() {
  const double start_s = now_s_;
  while (!queue_.empty()) run_head_alone();
  last_reduction_ = -1;
  return now_s_ - start_s;
}

}  // namespace osdp
