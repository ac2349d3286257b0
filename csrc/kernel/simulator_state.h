// The CPU simulator's state and statements (simulator.h says what it runs and checks), shared by
// simulator.cpp (blocks, expressions, scalar, vector and reduction statements), simulator_matrix.cpp
// (the asynchronous copies and the matrix statements: cp.async, ldmatrix, mma, wgmma) and
// simulator_tma.cpp (mbarriers and TMA loads).
#pragma once

#include "kernel/element_math.h"
#include "kernel/simulator.h"

#include <array>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace braze::kernel::sim {

using Mask = std::vector<char>;

class Simulator {
 public:
  Simulator(const Kernel& k, const SimLaunch& launch);

  // Blocks run one at a time, in a scrambled (but reproducible) order: a GPU promises no order, and
  // code that assumed one (say, that the last block of a grid reduction is the one with the highest
  // index) would fail here too.
  void run();

 private:
  [[noreturn]] void fail(int64_t t, const std::string& what) const;

  void checkAccess(int64_t t, TensorId tensor, int64_t offset, int64_t width) const;

  SimValue read(TensorId tensor, int64_t offset) const;

  void write(TensorId tensor, int64_t offset, SimValue v);

  int64_t indexValue(int64_t v, int64_t t) const;

  SimValue eval(ExprId id, int64_t t);
  // A local array's element i of thread t, or a shared array's element i of thread t's block.
  SimValue& arrayAt(VarId var, int64_t t, int64_t i);

  // A cluster's blocks (Kernel::cluster) run as one: thread t is thread t % block_threads_ of the block of
  // rank t / block_threads_, and each shared array holds every block's elements one block after the other.
  // What tracks shared elements is indexed by such keys: element i of the block of rank r is r * size + i.
  int64_t rankOf(int64_t t) const { return cluster_ == 1 ? 0 : t / block_threads_; }
  // The key of shared element i of thread t's block (an index outside the array is reported).
  int64_t sharedKey(VarId var, int64_t t, int64_t i) const;
  SimValue& sharedElement(VarId var, int64_t key) { return arrays_[var][key]; }
  // "name[i]", and the block's rank in a kernel with clusters.
  std::string elementName(VarId var, int64_t key) const;

  // Lockstep execution would hide a missing barrier, so shared accesses are checked instead: between
  // two barriers, an element one thread wrote may be read or written by no other thread, and an
  // element read by one thread may not be written by another, unless the second thread has since waited
  // on an mbarrier phase the first one arrived on after its access (warp-specialized pipelines order
  // their stages so, without barriers).
  void noteShared(VarId var, int64_t t, int64_t i, bool write) { noteSharedKey(var, t, sharedKey(var, t, i), write); }
  void noteSharedKey(VarId var, int64_t t, int64_t key, bool write);
  // Atomic adds to an element may come from any threads; any other access of another thread between the
  // same two barriers is a race.
  void noteSharedAtomic(VarId var, int64_t t, int64_t i);
  // Whether thread t has acquired, through an mbarrier wait, an arrival of thread u made after u's access
  // at release count `release`.
  bool acquiredAfter(int64_t t, int64_t u, int64_t release) const {
    return !acquired_.empty() && acquired_[t * threads_ + u] > release;
  }

  // A shared element some cp.async still has in flight (issued, not yet covered by a wait of its
  // thread) may not be read: on a GPU it could hold the old or the new bytes.
  void requireLanded(VarId var, int64_t t, int64_t i);

  struct PendingCopy {
    VarId var = -1;
    int64_t at = 0;
    std::vector<SimValue> values;
    int64_t group = -1;  // -1 until committed
  };

  void execCpAsync(const Stmt& s, const Mask& mask);
  void execCpAsyncCommit(const Mask& mask);

  // Lands every copy of the thread's committed groups but the newest `in_flight` ones, as the thread's
  // writes (a barrier is still needed before other threads read them).
  void execCpAsyncWait(const Stmt& s, const Mask& mask);

  // Per warp: each lane's row address, the PTX distribution of the rows' 4-byte pieces, and the bank
  // conflicts of each 8-row phase (a phase is conflict-free when its eight 16-byte rows fall in eight
  // distinct 16-byte bank groups of the 128-byte bank line).
  void execLdmatrix(const Stmt& s, const Mask& mask);
  void requireFullBlock(const Mask& mask, const char* what);
  void exec(const std::vector<Stmt>& stmts, const Mask& mask);
  void execOne(const Stmt& s, const Mask& mask);
  void execFor(const Stmt& s, Mask mask);
  void execVector(const Stmt& s, const Mask& mask);
  void execSharedAtomicAdd(const Stmt& s, const Mask& mask);

  // Gathers each warp's A, B and C from its lanes' fragments by the PTX layouts, computes D = A B + C
  // and scatters D back. Float: the k products (exact for bf16, f16 and fp8 operands) and C summed in double,
  // then rounded to float; tensor cores sum in an order and precision PTX leaves open, so a GPU may
  // differ in the last bits. Integer: exact, wrapped to int32.
  void execMma(const Stmt& s, const Mask& mask);

  // The threads of warpgroup g that reached a warpgroup statement: all of them, or none (a partial one is
  // an error).
  bool warpgroupActive(int64_t g, const Mask& mask, const char* what);

  // Reads A and B where the hardware would (kernel/wgmma.h), computes the warpgroup's 64 x n product
  // into its accumulators (float: exact products summed in double, rounded to float once per wgmma;
  // integer: exact, wrapped to int32), and
  // keeps the operand elements and the accumulators busy until a wgmma wait covers the group.
  void execWgmma(const Stmt& s, const Mask& mask);
  void execWgmmaCommit(const Mask& mask);
  void execWgmmaWait(const Stmt& s, const Mask& mask);

  // Accumulators of a wgmma in flight may be neither read nor written (`by_wgmma`: another wgmma into
  // them, which chains after it, is allowed).
  void requireAccumulatorsDone(VarId var, int64_t t, bool by_wgmma = false, bool write = false);
  // Ends the thread's unfenced shared writes (SKind::ProxyFence).
  void execProxyFence(const Mask& mask);
  void noteUnfenced(VarId var, int64_t t, int64_t i);
  void execReduce(const Stmt& s, const Mask& mask);

  // Mbarriers and TMA loads (simulator_tma.cpp). A TMA copy reads its box when issued and lands (its
  // elements written, its bytes counted) when a thread waits on the phase that needs it: an element read
  // or written before then (or read by a thread that waited on no such phase), an arrival beyond the
  // barrier's count, bytes beyond what the phase expects, a wait on a phase that can never complete or
  // that passes only if a phase has not completed yet, and a block ending with copies in flight are
  // reported.
  struct PendingTma {
    VarId var = -1;
    std::vector<int64_t> elements;  // of var, one per box element
    std::vector<SimValue> values;
    int64_t bytes = 0;
  };
  struct MbarrierState {
    bool initialized = false;
    int64_t init_thread = -1, init_epoch = -1, init_cluster_epoch = -1;
    int64_t arrivals = 0;        // per phase
    int64_t pending = 0;         // arrivals the current phase still waits for
    int64_t expected_bytes = 0;  // transaction bytes it waits for (arrive.expect_tx)
    int64_t delivered_bytes = 0;
    int64_t completed = 0;       // phases completed
    std::vector<PendingTma> copies;  // issued, not landed
    // The arrivals of the current phase and of the last completed one: (thread, its release count after
    // the arrival), which a wait on that phase acquires.
    std::vector<std::pair<int64_t, int64_t>> arrivals_now, arrivals_done;
  };
  void completePhase(MbarrierState& m);
  // The key of mbarrier var[at] of thread t's block, or of the block of cluster rank `rank` (>= 0).
  int64_t mbarrierKey(VarId var, int64_t t, ExprId at, int64_t rank = -1);
  MbarrierState& mbarrierAt(VarId var, int64_t t, int64_t key, bool initializing = false);
  void execMbarrierInit(const Stmt& s, const Mask& mask);
  void execMbarrierArrive(const Stmt& s, const Mask& mask);
  void execMbarrierWait(const Stmt& s, const Mask& mask);
  void execTmaLoad(const Stmt& s, const Mask& mask);
  // Lands the phase's copies and completes it where its arrivals and bytes are all in.
  void landCopies(MbarrierState& m, VarId var, int64_t index, int64_t t);
  void requireTmaLanded(VarId var, int64_t t, int64_t i, bool write) {
    requireTmaLandedKey(var, t, sharedKey(var, t, i), write);
  }
  void requireTmaLandedKey(VarId var, int64_t t, int64_t key, bool write);
  void requireNoTmaInFlight();

  // Branches that run at once (Stmt::concurrent, simulator_branches.cpp): each on a thread of its own,
  // one running at a time, the running one handing over where it waits on an mbarrier phase that has not
  // completed. Progress counts what may complete a phase (inits, arrivals, TMA loads issued).
  struct Interleaving;
  void execConcurrent(const Stmt& s, const Mask& then_mask, const Mask& else_mask);
  // Called by a waiting branch: runs the other one until it waits too or ends. False when nothing that
  // could complete a phase happened meanwhile (the wait would never be satisfied).
  bool handOver();
  void execSetMaxNReg(const Stmt& s, const Mask& mask);

  const Kernel& k_;
  std::array<int64_t, 2> grid_;
  const std::vector<ScalarValue>& arguments_;
  std::vector<HostTensor> tensors_;  // each parameter's base address, with its dtype
  int64_t threads_ = 1;  // of the cluster: block_threads_ x cluster_
  int64_t block_threads_ = 1, cluster_ = 1;
  std::array<int64_t, 2> block_{0, 0};  // the cluster's first block
  std::vector<std::vector<SimValue>> scalars_;
  std::vector<std::vector<SimValue>> arrays_;
  std::vector<std::pair<int64_t, int64_t>> bounds_;
  std::vector<std::optional<StridedLayout>> tma_maps_;  // SimLaunch::tma_maps
  // Since the last barrier: the thread that wrote the element and the one that read it (or kManyReaders),
  // each with its release count (mbarrier arrivals so far) at the access.
  // A block's barrier orders its own threads' accesses only: an access from another block of the cluster (a
  // multicast copy) is ordered after the element's earlier accesses by a cluster barrier (cluster_epoch).
  struct SharedAccess {
    int64_t epoch = -1, cluster_epoch = -1;
    int32_t writer = -1, writer_release = 0;
    int32_t reader = -1, reader_release = 0;
    int32_t adder = -1;  // the thread that added to it atomically (kManyReaders: several)
  };
  static constexpr int32_t kManyReaders = -2;
  std::unordered_map<VarId, std::vector<SharedAccess>> shared_;
  // Kernels with mbarriers: each thread's arrivals so far, and acquired_[t * threads + u], the release
  // count of u's last arrival that t acquired by a wait; the readers of elements read by several threads
  // since the last barrier, by (var, element).
  std::vector<int32_t> releases_, acquired_;
  bool uses_mbarriers_ = false;
  std::map<std::pair<VarId, int64_t>, std::vector<std::pair<int32_t, int32_t>>> many_readers_;
  int64_t epoch_ = 0;  // barriers passed by the block
  // Cluster barriers passed; whether a block arrived on another's mbarrier or copied into its shared memory
  // since the last one (then the kernel may not end: the other block could have exited). The blocks of a
  // cluster run in lockstep, so a block barrier (or block reduction) must be reached by all of them: one
  // reached by some blocks only is reported, though a GPU would run it, as the simulator could not order
  // one block's threads apart from the others'.
  int64_t cluster_epoch_ = 0;
  bool remote_since_cluster_barrier_ = false;
  void execClusterBarrier(const Mask& mask);
  SimStats* stats_ = nullptr;
  // cp.async: each thread's copies not landed yet, its committed group count, and per shared element
  // the copies in flight into it.
  std::unordered_map<int64_t, std::vector<PendingCopy>> pending_;
  std::unordered_map<int64_t, int64_t> groups_;
  std::unordered_map<VarId, std::vector<int32_t>> in_flight_;
  // wgmma, per warpgroup: its committed group count and the wgmmas not covered by a wait yet (the shared
  // elements each reads, its accumulators, its group: -1 until committed); per shared element the
  // wgmmas in flight reading it; the accumulator arrays in flight.
  struct WgmmaInFlight {
    VarId accumulators = -1;
    std::vector<std::pair<VarId, int64_t>> reads;
    int64_t group = -1;
  };
  std::unordered_map<int64_t, int64_t> wgmma_groups_;
  std::unordered_map<int64_t, std::vector<WgmmaInFlight>> wgmma_pending_;
  std::unordered_map<VarId, std::vector<int32_t>> wgmma_reading_;
  std::map<std::pair<int64_t, VarId>, int64_t> busy_accumulators_;
  // Shared elements written (stored, or a cp.async landed) with no proxy fence by the writer since: the
  // writer + 1, or 0; and each thread's such writes.
  std::unordered_map<VarId, std::vector<int32_t>> unfenced_;
  std::unordered_map<int64_t, std::vector<std::pair<VarId, int64_t>>> unfenced_list_;
  // (warpgroup, local array) pairs written since the warpgroup's last wgmma fence.
  std::set<std::pair<int64_t, VarId>> unfenced_accumulators_;
  // Per Mbarriers var: each barrier's state; per shared element, the TMA copies in flight into it.
  std::unordered_map<VarId, std::vector<MbarrierState>> mbarriers_;
  std::unordered_map<VarId, std::vector<int32_t>> tma_in_flight_;
  // Shared elements a TMA copy wrote since the last barrier: the mbarrier (var, index) and the phase count
  // a thread must have waited for before it reads them; and per mbarrier, the phase count each thread's
  // last wait saw completed.
  struct LandedBy {
    VarId mbarriers = -1;
    int64_t index = 0, phases = 0;
  };
  std::map<std::pair<VarId, int64_t>, LandedBy> tma_landed_;
  std::map<std::pair<VarId, int64_t>, std::vector<int64_t>> waited_;
  Interleaving* interleaving_ = nullptr;  // while branches run at once
  int branch_ = -1;                       // the one running (0: then, 1: else)
  int64_t progress_ = 0;
};

}  // namespace braze::kernel::sim
