// A pipeline stage's passes operator by operator beside their data-parallel stream, as the
// runtime (validate/parallel_gpt) issues it: one compute thread and one first-in-first-out
// stream of collectives. Before an operator computes, its parameters' all-gather is issued (if
// not yet) and the next operator's with it (a prefetch of one, never across passes), and the
// compute waits for its own; after it computes, its gradients' reduce-scatter is issued once
// the previous one is done (one reduction in flight, so that gradient buffers do not pile up).
// The stream carries over from pass to pass: a backward's last reductions delay the next
// pass's gathers. On shared cores (CPU ranks) compute and stream each run slower while both
// run, as OverlappedPhase says for a whole phase; and a collective starts no earlier than the
// cluster's blocking_sync_s after it was issued (the other ranks issue it later: their threads
// are scheduled late), a wait that takes no core from the compute and that a stream already
// busy with earlier work absorbs.
#pragma once

#include <deque>
#include <vector>

namespace osdp {

// One operator of a pass as the stream sees it (seconds at full speed; 0: none).
struct StreamedOperator {
  double compute_s = 0;
  double gather_s = 0;  // all-gathers it needs before it computes
  double reduce_s = 0;  // reductions of its gradients, issued after it computes
};

struct StreamedPassTime {
  double length_s = 0;  // from the pass's start to its last compute's end
  double wait_s = 0;    // of which the compute waited for the stream
};

class PassStream {
 public:
  // `compute_slowdown` and `communication_slowdown`: how much slower each runs while the other
  // does (1: apart); `arrival_s`: how long after its issue a collective can start (the other
  // ranks' issue).
  PassStream(double compute_slowdown, double communication_slowdown, double arrival_s = 0);

  // The pass's operators in the order they compute; continues where the last pass left the
  // stream.
  StreamedPassTime run(const std::vector<StreamedOperator>& operators);

  // The stream's work still queued after the last pass: the time until it is done (the compute
  // waits for it before the optimizer step). Empties the stream.
  double drain_s();

 private:
  struct Work {
    long id = 0;
    double ready_s = 0;      // when every rank has issued it
    double remaining_s = 0;  // at full speed
  };
  long issue(double work_s);
  bool done(long id) const;
  void run_head_alone();
  double wait_for(long id);  // the stream alone until `id` is done; returns the time waited
  void compute(double compute_s);

  double compute_slowdown_;
  double communication_slowdown_;
  double arrival_s_;
  std::deque<Work> queue_;
  long next_id_ = 0;
  long last_reduction_ = -1;
  double now_s_ = 0;
};

}  // namespace osdp
