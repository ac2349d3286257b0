// Branches that run at once (Stmt::concurrent): a warp-specialized block's producer and consumers, each
// in a loop of its own, waiting on mbarrier phases the other completes. Lockstep execution would run
// one branch to its end first and so deadlock at its first wait on the other; instead each branch runs
// on a thread of its own, one at a time (the simulator's state is never touched by two at once), and the
// running branch hands over where it waits on a phase that has not completed. The order is reproducible
// (a hand-over happens only at such a wait), and a wait that nothing the other branch can still do would
// satisfy is reported as the deadlock it would be on a GPU.
#include "kernel/simulator_state.h"

#include "support/error.h"

#include <condition_variable>
#include <functional>
#include <exception>
#include <mutex>
#include <thread>

namespace braze::kernel::sim {

struct Simulator::Interleaving {
  std::mutex mutex;
  std::condition_variable changed;
  int turn = 0;  // the branch that may run
  std::array<bool, 2> done{false, false};
  std::exception_ptr first_error;  // the first failure, which a failure of the other branch may follow from
};

void Simulator::execConcurrent(const Stmt& s, const Mask& then_mask, const Mask& else_mask) {
  BRAZE_ASSERT(interleaving_ == nullptr, "kernel {}: branches that run at once inside such branches", k_.name);
  Interleaving state;
  interleaving_ = &state;
  auto run = [&](int me, const std::vector<Stmt>& stmts, const Mask& mask) {
    {
      std::unique_lock<std::mutex> lock(state.mutex);
      state.changed.wait(lock, [&] { return state.turn == me; });
    }
    branch_ = me;
    std::exception_ptr error;
    try {
      exec(stmts, mask);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      if (error && !state.first_error) state.first_error = error;
      state.done[me] = true;
      state.turn = 1 - me;
    }
    state.changed.notify_all();
  };
  std::thread then_branch(run, 0, std::cref(s.body), std::cref(then_mask));
  std::thread else_branch(run, 1, std::cref(s.orelse), std::cref(else_mask));
  then_branch.join();
  else_branch.join();
  interleaving_ = nullptr;
  branch_ = -1;
  if (state.first_error) std::rethrow_exception(state.first_error);
}

bool Simulator::handOver() {
  Interleaving& state = *interleaving_;
  const int me = branch_;
  const int64_t before = progress_;
  std::unique_lock<std::mutex> lock(state.mutex);
  if (state.done[1 - me]) return false;  // the other branch has ended: nothing more will arrive
  state.turn = 1 - me;
  state.changed.notify_all();
  state.changed.wait(lock, [&] { return state.turn == me; });
  branch_ = me;
  return progress_ != before;
}

void Simulator::execSetMaxNReg(const Stmt& s, const Mask& mask) {
  for (int64_t g = 0; g * 128 < threads_; ++g) {
    if (!warpgroupActive(g, mask, "setmaxnreg")) continue;
    auto pending = wgmma_pending_.find(g);
    if (pending != wgmma_pending_.end() && !pending->second.empty()) {
      fail(g * 128, fmt::format("setmaxnreg {} with wgmmas in flight (their accumulators are registers)", s.width));
    }
  }
}

}  // namespace braze::kernel::sim
