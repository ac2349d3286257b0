#include "kernel/simulator.h"
#include "kernel/simulator_state.h"

#include "support/error.h"
#include "ir/random_numbers.h"
#include "kernel/element_math.h"
#include "kernel/index_errors.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <unordered_map>

namespace braze::kernel {
namespace sim {

Simulator::Simulator(const Kernel& k, const SimLaunch& launch)
    : k_(k), grid_(launch.grid), arguments_(launch.arguments), stats_(launch.stats) {
  BRAZE_ASSERT(launch.tensors.size() == k.tensors.size(), "kernel {} takes {} tensors, got {}", k.name,
               k.tensors.size(), launch.tensors.size());
  BRAZE_ASSERT(arguments_.size() == k.arguments.size(), "kernel {} takes {} scalar arguments, got {}", k.name,
               k.arguments.size(), arguments_.size());
  BRAZE_ASSERT(launch.extents.empty() || launch.extents.size() == k.tensors.size(),
               "kernel {}: {} tensor extents for {} tensors", k.name, launch.extents.size(), k.tensors.size());
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    tensors_.push_back(HostTensor::wrap(launch.tensors[t], k.tensors[t].dtype, {}, {}));
    tma_maps_.push_back(t < launch.tma_maps.size() ? launch.tma_maps[t] : std::nullopt);
  }
  block_threads_ = k.threadsPerBlock();
  cluster_ = k.cluster;
  threads_ = block_threads_ * cluster_;
  uses_mbarriers_ = std::any_of(k.vars.begin(), k.vars.end(), [](const KVar& v) { return v.kind == VarKind::Mbarriers; });
  scalars_.assign(k.vars.size(), {});
  arrays_.assign(k.vars.size(), {});
  for (size_t v = 0; v < k.vars.size(); ++v) {
    if (k.vars[v].kind == VarKind::Scalar) scalars_[v].assign(threads_, SimValue{});
  }
  for (size_t t = 0; t < k.tensors.size() && !launch.extents.empty(); ++t) bounds_.push_back(launch.extents[t]);
  for (size_t t = 0; t < k.tensors.size() && launch.extents.empty(); ++t) {
    const StridedLayout& l = k.tensors[t].layout;
    int64_t lo = l.offset, hi = l.offset;
    bool empty = false;
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      if (l.sizes[d] == 0) empty = true;
      const int64_t span = (l.sizes[d] - 1) * l.strides[d];
      (span < 0 ? lo : hi) += span;
    }
    bounds_.push_back(empty ? std::make_pair(int64_t{1}, int64_t{0}) : std::make_pair(lo, hi));
  }
}

void Simulator::run() {
  BRAZE_ASSERT(grid_[0] % cluster_ == 0, "kernel {}: a grid of {} blocks along x in clusters of {}", k_.name, grid_[0],
               cluster_);
  const int64_t clusters_x = grid_[0] / cluster_, clusters = clusters_x * grid_[1];
  std::vector<int64_t> order(clusters);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(std::hash<std::string>{}(k_.name));
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t c : order) {
    block_ = {c % clusters_x * cluster_, c / clusters_x};
    remote_since_cluster_barrier_ = false;
    pending_.clear();
    groups_.clear();
    in_flight_.clear();
    wgmma_groups_.clear();
    wgmma_pending_.clear();
    wgmma_reading_.clear();
    busy_accumulators_.clear();
    unfenced_.clear();
    unfenced_list_.clear();
    unfenced_accumulators_.clear();
    mbarriers_.clear();
    tma_in_flight_.clear();
    tma_landed_.clear();
    waited_.clear();
    many_readers_.clear();
    if (uses_mbarriers_) {
      releases_.assign(threads_, 0);
      acquired_.assign(threads_ * threads_, 0);
    }
    exec(k_.body, Mask(threads_, 1));
    requireNoTmaInFlight();
    for (const auto& [g, flights] : wgmma_pending_) {
      if (!flights.empty()) fail(g * 128, "the block ends with wgmmas in flight (no wgmma wait covers them)");
    }
    if (remote_since_cluster_barrier_) {
      fail(0, "the cluster's blocks end with no cluster barrier after a block arrived on another's mbarrier or "
              "copied into its shared memory: that block may have exited by then");
    }
  }
}

[[noreturn]] void Simulator::fail(int64_t t, const std::string& what) const {
  throwError(ErrorKind::Index, __FILE__, __LINE__,
             fmt::format("kernel {}: {} (block ({}, {}), thread ({}, {}))", k_.name, what, block_[0] + rankOf(t),
                         block_[1], t % block_threads_ % k_.block[0], t % block_threads_ / k_.block[0]));
}

int64_t Simulator::sharedKey(VarId var, int64_t t, int64_t i) const {
  const KVar& v = k_.vars[var];
  if (i < 0 || i >= v.size) fail(t, fmt::format("index {} outside shared array {}[{}]", i, v.name, v.size));
  return rankOf(t) * v.size + i;
}

std::string Simulator::elementName(VarId var, int64_t key) const {
  const KVar& v = k_.vars[var];
  if (cluster_ == 1) return fmt::format("{}[{}]", v.name, key);
  return fmt::format("{}[{}] of the cluster's block {}", v.name, key % v.size, key / v.size);
}

void Simulator::checkAccess(int64_t t, TensorId tensor, int64_t offset, int64_t width) const {
  const auto [lo, hi] = bounds_[tensor];
  if (offset < lo || offset + width - 1 > hi) {
    fail(t, fmt::format("{} access of {} at element offset {} is outside [{}, {}]", width > 1 ? "vector" : "scalar",
                        k_.tensors[tensor].name, offset, lo, hi));
  }
}

SimValue Simulator::read(TensorId tensor, int64_t offset) const {
  const HostTensor& h = tensors_[tensor];
  SimValue v;
  if (isFloating(h.dtype())) {
    v.f = h.readDouble(offset);
  } else {
    v.i = h.readInt(offset);
  }
  return v;
}

void Simulator::write(TensorId tensor, int64_t offset, SimValue v) {
  HostTensor& h = tensors_[tensor];
  if (h.dtype() == DataType::Float8_e5m2 && std::isinf(v.f)) {
    // The kernels' store keeps an infinity, which e5m2 holds (braze_store_e5m2): a value moved, not
    // computed (a computed one was rounded, saturating, by a cast before).
    h.data()[offset] = v.f > 0 ? uint8_t{0x7C} : uint8_t{0xFC};  // one byte per element
  } else if (isFloating(h.dtype())) {
    h.writeDouble(offset, v.f);
  } else {
    h.writeInt(offset, v.i);
  }
}

int64_t Simulator::indexValue(int64_t v, int64_t t) const {
  // The emitted CUDA computes indices in 32 bits unless the kernel asked for 64, where an overflow is
  // undefined behaviour: report it (the lowering should have chosen 64-bit indexing).
  if (!k_.index64 && v != static_cast<int64_t>(static_cast<int32_t>(v))) {
    fail(t, fmt::format("32-bit index arithmetic overflows: {}", v));
  }
  return v;
}

SimValue Simulator::eval(ExprId id, int64_t t) {
  const KExpr& e = k_.exprs[id];
  auto I = [&](size_t a) { return eval(e.args[a], t).i; };
  SimValue r;
  switch (e.kind) {
    case EKind::ConstInt:
    case EKind::ConstBool: r.i = e.i; return r;
    case EKind::ConstFloat: r.f = e.f; return r;
    case EKind::VarRef: return scalars_[e.ref][t];
    case EKind::Argument: {  // as the constant it replaces would be (ConstFloat, ConstInt, ConstBool)
      const ScalarArgument& a = k_.arguments[e.ref];
      const ScalarValue& value = arguments_[e.ref];
      if (!a.index && isFloating(a.dtype)) {
        r.f = toDouble(value);
      } else {
        r.i = isBool(a.dtype) ? int64_t{toInt(value) != 0} : toInt(value);
      }
      return r;
    }
    case EKind::ThreadIdx: {
      const int64_t local = cluster_ == 1 ? t : t % block_threads_;
      r.i = e.i == 0 ? local % k_.block[0] : local / k_.block[0];
      return r;
    }
    case EKind::BlockIdx: r.i = block_[e.i] + (e.i == 0 ? rankOf(t) : 0); return r;
    case EKind::ClusterRank: r.i = rankOf(t); return r;
    case EKind::Add: r.i = indexValue(I(0) + I(1), t); return r;
    case EKind::Sub: r.i = indexValue(I(0) - I(1), t); return r;
    case EKind::Mul: r.i = indexValue(I(0) * I(1), t); return r;
    case EKind::Div:
    case EKind::Mod: {
      const int64_t a = I(0), b = I(1);
      if (b == 0) fail(t, "index division by zero");
      r.i = e.kind == EKind::Div ? a / b : a % b;
      return r;
    }
    case EKind::Min: r.i = std::min(I(0), I(1)); return r;
    case EKind::Xor: r.i = I(0) ^ I(1); return r;
    case EKind::BitAnd: r.i = I(0) & I(1); return r;
    case EKind::WarpUniform: {
      r.i = I(0);
      const int64_t lane0 = t - t % k_.warp_size;
      if (eval(e.args[0], lane0).i != r.i) fail(t, "a warp-uniform index differs from its warp's lane 0's");
      return r;
    }
    case EKind::OrderKey: {
      const auto x = static_cast<float>(eval(e.args[0], t).f);
      uint32_t bits = 0;
      if (x != 0.0f) std::memcpy(&bits, &x, sizeof bits);
      r.i = std::isnan(x) ? int64_t{0xffffffff} : int64_t{(bits >> 31) != 0 ? ~bits : (bits | 0x80000000u)};
      return r;
    }
    case EKind::Lt: r.i = I(0) < I(1); return r;
    case EKind::Le: r.i = I(0) <= I(1); return r;
    case EKind::Eq: r.i = I(0) == I(1); return r;
    case EKind::And: r.i = I(0) && I(1); return r;
    case EKind::Or: r.i = I(0) || I(1); return r;
    case EKind::Not: r.i = !I(0); return r;
    case EKind::Select: return eval(e.args[0], t).i ? eval(e.args[1], t) : eval(e.args[2], t);
    case EKind::Elementwise: {
      SimValue ops[4];
      DataType dtypes[4];
      const size_t n = e.args.size();
      BRAZE_ASSERT(n <= 4, "elementwise with {} operands", n);
      for (size_t a = 0; a < n; ++a) {
        ops[a] = eval(e.args[a], t);
        dtypes[a] = k_.exprs[e.args[a]].dtype;
      }
      return simElementwise(e.op, e.dtype, {ops, n}, {dtypes, n});
    }
    case EKind::Cast: return simCast(eval(e.args[0], t), e.from, e.dtype);
    case EKind::Fma: {
      auto f = [&](size_t a) { return static_cast<float>(eval(e.args[a], t).f); };
      r.f = static_cast<double>(std::fma(f(0), f(1), f(2)));
      return r;
    }
    case EKind::IndexToValue: {
      const int64_t i = I(0);
      if (isFloating(e.dtype)) {
        r.f = static_cast<double>(i);
      } else {
        r.i = i;
      }
      return r;
    }
    case EKind::ValueToIndex: r.i = I(0); return r;
    case EKind::CheckedIndex: {
      r.i = I(0);
      if (r.i >= 0 && r.i < I(1)) return r;
      HostTensor& record = tensors_[*k_.index_errors];
      checkAccess(t, *k_.index_errors, 0, kIndexErrorWords);
      recordIndexError(reinterpret_cast<int64_t*>(record.data()), e.i, r.i);
      r.i = 0;
      return r;
    }
    case EKind::RandomUnit: {
      const auto seed = static_cast<uint64_t>(eval(e.args[0], t).i);
      const auto offset = static_cast<uint64_t>(eval(e.args[1], t).i);
      const auto i = static_cast<uint64_t>(eval(e.args[2], t).i);
      r.f = e.op == OpKind::Uniform ? uniformUnit(seed, offset, i) : standardNormal(seed, offset, i);
      return r;
    }
    case EKind::Load: {
      const int64_t offset = I(0);
      checkAccess(t, e.ref, offset, 1);
      return read(e.ref, offset);
    }
    case EKind::LocalRead: {
      const int64_t i = I(0);
      if (k_.vars[e.ref].kind == VarKind::SharedArray) {
        requireLanded(e.ref, t, i);
        noteShared(e.ref, t, i, false);
      } else {
        requireAccumulatorsDone(e.ref, t);
      }
      return arrayAt(e.ref, t, i);
    }
  }
  BRAZE_UNREACHABLE("simulator: expression kind {}", static_cast<int>(e.kind));
}

SimValue& Simulator::arrayAt(VarId var, int64_t t, int64_t i) {
  const KVar& v = k_.vars[var];
  if (v.kind == VarKind::SharedArray) return arrays_[var][sharedKey(var, t, i)];
  if (i < 0 || i >= v.size) fail(t, fmt::format("index {} outside local array {}[{}]", i, v.name, v.size));
  return arrays_[var][t * v.size + i];
}

void Simulator::noteSharedAtomic(VarId var, int64_t t, int64_t i) {
  SharedAccess& a = shared_[var][sharedKey(var, t, i)];
  if (a.epoch != epoch_) a = SharedAccess{epoch_, cluster_epoch_};
  const int32_t other = a.writer >= 0 && a.writer != t ? a.writer : a.reader >= 0 && a.reader != t ? a.reader
                                                                   : a.reader == kManyReaders       ? kManyReaders
                                                                                                    : -1;
  if (other != -1) {
    fail(t, fmt::format("adds atomically to shared {}[{}], which {} {}, with no barrier in between", k_.vars[var].name, i,
                        other == kManyReaders ? std::string("other threads") : fmt::format("thread {}", other),
                        other == a.writer ? "wrote" : "read"));
  }
  a.adder = a.adder < 0 || a.adder == t ? static_cast<int32_t>(t) : kManyReaders;
}

void Simulator::noteSharedKey(VarId var, int64_t t, int64_t key, bool write) {
  SharedAccess& a = shared_[var][key];
  const bool remote = cluster_ > 1 && key / k_.vars[var].size != rankOf(t);
  if (a.epoch != epoch_ && (!remote || a.cluster_epoch != cluster_epoch_)) {
    // A cluster's readers outlive block barriers (for another block's write to check): not those of a reset.
    if (cluster_ > 1 && a.reader == kManyReaders) many_readers_.erase({var, key});
    a = SharedAccess{epoch_, cluster_epoch_};
  }
  if (a.adder != -1 && a.adder != t) {
    fail(t, fmt::format("{} shared {}, which {} added to atomically, with no barrier in between",
                        write ? "writes" : "reads", elementName(var, key),
                        a.adder == kManyReaders ? std::string("other threads") : fmt::format("thread {}", a.adder)));
  }
  const int32_t release = releases_.empty() ? 0 : releases_[t];
  if (a.writer >= 0 && a.writer != t && !acquiredAfter(t, a.writer, a.writer_release)) {
    fail(t, fmt::format("{} shared {}, which thread {} wrote, with no barrier in between (nor a wait on an "
                        "mbarrier it arrived on since)",
                        write ? "writes" : "reads", elementName(var, key), a.writer));
  }
  if (write) {
    if (auto it = wgmma_reading_.find(var); it != wgmma_reading_.end() && it->second[key] > 0) {
      fail(t, fmt::format("writes shared {}, which a wgmma still in flight reads (no wgmma wait covers it)", elementName(var, key)));
    }
    auto unordered = [&](int32_t reader, int32_t at) { return reader != t && !acquiredAfter(t, reader, at); };
    int64_t racing = -1;
    if (a.reader >= 0 && unordered(a.reader, a.reader_release)) racing = a.reader;
    if (a.reader == kManyReaders) {
      auto many = many_readers_.find({var, key});
      racing = kManyReaders;  // readers not recorded (no mbarriers): any other thread
      if (many != many_readers_.end()) {
        racing = -1;
        for (const auto& [reader, at] : many->second) {
          if (unordered(reader, at)) racing = reader;
        }
        many_readers_.erase(many);
      }
    }
    if (racing != -1) {
      fail(t, fmt::format("writes shared {}, which {} read, with no barrier in between (nor a wait on an mbarrier "
                          "it arrived on since)",
                          elementName(var, key), racing == kManyReaders ? std::string("other threads") : fmt::format("thread {}", racing)));
    }
    a.writer = static_cast<int32_t>(t);
    a.writer_release = release;
    a.reader = -1;  // every read so far is ordered before this write
  } else if (a.reader < 0 || a.reader == t) {
    a.reader = static_cast<int32_t>(t);
    a.reader_release = release;
  } else if (!acquired_.empty()) {
    // Several readers: each one's release count, for the next write to check.
    auto& readers = many_readers_[{var, key}];
    if (a.reader != kManyReaders) readers.emplace_back(a.reader, a.reader_release);
    readers.emplace_back(static_cast<int32_t>(t), release);
    a.reader = kManyReaders;
  } else {
    a.reader = kManyReaders;
  }
}

void Simulator::requireLanded(VarId var, int64_t t, int64_t i) {
  const int64_t key = sharedKey(var, t, i);
  requireTmaLandedKey(var, t, key, false);
  auto it = in_flight_.find(var);
  if (it == in_flight_.end() || it->second[key] == 0) return;
  fail(t, fmt::format("reads shared {} while a cp.async into it is in flight (no cp.async wait covers it)",
                      elementName(var, key)));
}

void Simulator::requireFullBlock(const Mask& mask, const char* what) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (mask[t]) continue;
    if (cluster_ > 1 && !mask[t - t % block_threads_]) {
      fail(t, fmt::format("{} reached by only some blocks of the cluster (the simulator runs a cluster's blocks in "
                          "lockstep and orders them only together)",
                          what));
    }
    fail(t, fmt::format("{} reached by only part of the block (this thread is inactive)", what));
  }
}

void Simulator::exec(const std::vector<Stmt>& stmts, const Mask& mask) {
  for (const Stmt& s : stmts) execOne(s, mask);
}

void Simulator::execOne(const Stmt& s, const Mask& mask) {
  switch (s.kind) {
    case SKind::Let:
    case SKind::Assign:
      for (int64_t t = 0; t < threads_; ++t) {
        if (mask[t]) scalars_[s.var][t] = eval(s.a, t);
      }
      return;
    case SKind::Declare: {
      const KVar& v = k_.vars[s.var];
      if (v.kind == VarKind::Mbarriers) {
        for (const MbarrierState& m : mbarriers_[s.var]) {
          if (!m.copies.empty()) fail(0, fmt::format("declares mbarriers {} again while TMA copies complete on them", v.name));
        }
        mbarriers_[s.var].assign(cluster_ * v.size, MbarrierState{});
        return;
      }
      // Poison: a read before a write shows up as NaN (or an absurd integer) in the results.
      const bool shared = v.kind == VarKind::SharedArray;
      arrays_[s.var].assign((shared ? cluster_ : threads_) * v.size,
                            SimValue{std::numeric_limits<double>::quiet_NaN(), -123456789});
      if (shared) shared_[s.var].assign(cluster_ * v.size, SharedAccess{});
      return;
    }
    case SKind::LocalWrite: {
      const bool shared = k_.vars[s.var].kind == VarKind::SharedArray;
      // All values first: a shared write must not be seen by another thread's value in the same statement.
      std::vector<std::pair<int64_t, SimValue>> writes(threads_);
      for (int64_t t = 0; t < threads_; ++t) {
        if (mask[t]) writes[t] = {eval(s.a, t).i, eval(s.b, t)};
      }
      for (int64_t t = 0; t < threads_; ++t) {
        if (!mask[t]) continue;
        if (shared) {
          requireTmaLanded(s.var, t, writes[t].first, true);
          noteShared(s.var, t, writes[t].first, true);
          noteUnfenced(s.var, t, writes[t].first);
        } else {
          requireAccumulatorsDone(s.var, t, false, true);
        }
        arrayAt(s.var, t, writes[t].first) = writes[t].second;
      }
      return;
    }
    case SKind::For: execFor(s, mask); return;
    case SKind::If: {
      Mask then_mask(threads_, 0), else_mask(threads_, 0);
      bool any_then = false, any_else = false;
      for (int64_t t = 0; t < threads_; ++t) {
        if (!mask[t]) continue;
        const bool c = eval(s.a, t).i != 0;
        (c ? then_mask : else_mask)[t] = 1;
        (c ? any_then : any_else) = true;
      }
      if (s.concurrent && any_then && any_else && !s.orelse.empty()) return execConcurrent(s, then_mask, else_mask);
      if (any_then) exec(s.body, then_mask);
      if (any_else && !s.orelse.empty()) exec(s.orelse, else_mask);
      return;
    }
    case SKind::Store:
      for (int64_t t = 0; t < threads_; ++t) {
        if (!mask[t]) continue;
        const int64_t offset = eval(s.a, t).i;
        checkAccess(t, s.tensor, offset, 1);
        write(s.tensor, offset, eval(s.b, t));
      }
      return;
    case SKind::VecLoad:
    case SKind::VecStore: execVector(s, mask); return;
    case SKind::BlockReduce: execReduce(s, mask); return;
    case SKind::Mma: execMma(s, mask); return;
    case SKind::CpAsync: execCpAsync(s, mask); return;
    case SKind::CpAsyncCommit: execCpAsyncCommit(mask); return;
    case SKind::CpAsyncWait: execCpAsyncWait(s, mask); return;
    case SKind::Ldmatrix: execLdmatrix(s, mask); return;
    case SKind::Wgmma: execWgmma(s, mask); return;
    case SKind::WgmmaFence:  // the warpgroups' accumulator writes are ordered before their next wgmmas
      for (int64_t g = 0; g * 128 < threads_; ++g) {
        if (warpgroupActive(g, mask, "wgmma fence")) std::erase_if(unfenced_accumulators_, [&](const auto& w) { return w.first == g; });
      }
      return;
    case SKind::WgmmaCommit: execWgmmaCommit(mask); return;
    case SKind::WgmmaWait: execWgmmaWait(s, mask); return;
    case SKind::ProxyFence: execProxyFence(mask); return;
    case SKind::MbarrierInit: execMbarrierInit(s, mask); return;
    case SKind::MbarrierArriveExpectTx: execMbarrierArrive(s, mask); return;
    case SKind::MbarrierWait: execMbarrierWait(s, mask); return;
    case SKind::TmaLoad: execTmaLoad(s, mask); return;
    case SKind::SetMaxNReg: execSetMaxNReg(s, mask); return;
    case SKind::Fence: return;  // blocks run one after another: writes are visible at once
    case SKind::AtomicAdd:
      for (int64_t t = 0; t < threads_; ++t) {
        if (!mask[t]) continue;
        const int64_t offset = eval(s.a, t).i;
        checkAccess(t, s.tensor, offset, 1);
        SimValue old = read(s.tensor, offset);
        scalars_[s.var][t] = old;
        old.i += eval(s.b, t).i;
        write(s.tensor, offset, old);
      }
      return;
    case SKind::SharedAtomicAdd: execSharedAtomicAdd(s, mask); return;
    case SKind::SharedVecLoad:
      for (int64_t t = 0; t < threads_; ++t) {
        if (!mask[t]) continue;
        const int64_t from = eval(s.a, t).i, at = eval(s.b, t).i;
        const KVar& v = k_.vars[s.target];
        const int64_t bytes = s.width * sizeOf(v.dtype);
        if ((v.shared_offset + from * sizeOf(v.dtype)) % bytes != 0) {
          fail(t, fmt::format("{}-byte vector read of shared {} at element {} is misaligned", bytes, v.name, from));
        }
        for (int64_t j = 0; j < s.width; ++j) {
          requireLanded(s.target, t, from + j);
          noteShared(s.target, t, from + j, false);
          arrayAt(s.var, t, at + j) = arrayAt(s.target, t, from + j);
        }
      }
      return;
    case SKind::Barrier:
      requireFullBlock(mask, "a barrier");
      ++epoch_;
      tma_landed_.clear();  // what a thread saw by its mbarrier wait, every thread sees after the barrier
      if (cluster_ == 1) many_readers_.clear();
      return;
    case SKind::ClusterBarrier: execClusterBarrier(mask); return;
  }
}

void Simulator::execClusterBarrier(const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) fail(t, "a cluster barrier reached by only part of the cluster (this thread is inactive)");
  }
  ++epoch_;
  ++cluster_epoch_;
  tma_landed_.clear();
  many_readers_.clear();
  remote_since_cluster_barrier_ = false;
}

void Simulator::execFor(const Stmt& s, Mask mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (mask[t]) scalars_[s.var][t] = eval(s.a, t);
  }
  while (true) {
    bool any = false;
    for (int64_t t = 0; t < threads_; ++t) {
      if (!mask[t]) continue;
      mask[t] = scalars_[s.var][t].i < eval(s.b, t).i;
      any = any || mask[t];
    }
    if (!any) return;
    exec(s.body, mask);
    for (int64_t t = 0; t < threads_; ++t) {
      if (mask[t]) scalars_[s.var][t].i += eval(s.c, t).i;
    }
  }
}

void Simulator::execSharedAtomicAdd(const Stmt& s, const Mask& mask) {
  // The GPU serializes the adds to one element in no set order, and each thread's old value depends on
  // it: the threads take their turns in an order of their own here, so code that counts on lower threads
  // going first gets other values than it expects.
  std::vector<int64_t> order;
  for (int64_t t = 0; t < threads_; ++t) {
    if (mask[t]) order.push_back(t);
  }
  std::mt19937_64 rng(static_cast<uint64_t>(epoch_) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(block_[0]));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::pair<int64_t, int64_t>> adds;  // (at, value) per thread, all evaluated before any add
  adds.reserve(order.size());
  for (int64_t t : order) adds.emplace_back(eval(s.a, t).i, eval(s.b, t).i);
  for (size_t n = 0; n < order.size(); ++n) {
    const int64_t t = order[n];
    const auto [at, value] = adds[n];
    noteSharedAtomic(s.target, t, at);
    SimValue& element = arrayAt(s.target, t, at);
    if (s.var >= 0) scalars_[s.var][t] = element;
    element.i = static_cast<int32_t>(static_cast<uint32_t>(element.i) + static_cast<uint32_t>(value));
  }
}

void Simulator::execVector(const Stmt& s, const Mask& mask) {
  const TensorParam& p = k_.tensors[s.tensor];
  const int64_t bytes = s.width * sizeOf(p.dtype);
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    const int64_t offset = eval(s.a, t).i;
    const int64_t at = eval(s.b, t).i;
    checkAccess(t, s.tensor, offset, s.width);
    const auto address = reinterpret_cast<uintptr_t>(tensors_[s.tensor].data()) + offset * sizeOf(p.dtype);
    if (address % bytes != 0) {
      fail(t, fmt::format("{}-byte vector access of {} at element offset {} is misaligned (address % {} = {})", bytes,
                          p.name, offset, bytes, address % bytes));
    }
    for (int64_t j = 0; j < s.width; ++j) {
      if (s.kind == SKind::VecLoad) {
        arrayAt(s.var, t, at + j) = read(s.tensor, offset + j);
      } else {
        write(s.tensor, offset + j, arrayAt(s.var, t, at + j));
      }
    }
  }
}

void Simulator::execReduce(const Stmt& s, const Mask& mask) {
  requireFullBlock(mask, "a block reduction");
  // The emitted reduction synchronizes the block unless it is a warp shuffle (see the emitter).
  if (!(s.axis == 0 && k_.block[0] <= k_.warp_size && k_.vars[s.var].dtype != DataType::Bool)) {
    ++epoch_;
    if (cluster_ == 1) many_readers_.clear();
  }
  const DataType dtype = k_.vars[s.var].dtype;
  const OpKind combine = combineOf(s.reduce);
  const int64_t bx = k_.block[0], by = k_.block[1];
  const int64_t groups = s.axis == 0 ? by : bx;
  const int64_t members = s.axis == 0 ? bx : by;
  const DataType dtypes[2] = {dtype, dtype};
  // Each block of a cluster that reached it (whole blocks: requireFullBlock), its groups of threads.
  for (int64_t group = 0; group < cluster_ * groups; ++group) {
    const int64_t rank = group / groups, g = group % groups;
    if (!mask[rank * block_threads_]) continue;
    auto thread = [&](int64_t m) { return rank * block_threads_ + (s.axis == 0 ? g * bx + m : m * bx + g); };
    // A tree of pairs at distance 1, 2, 4... The GPU combines in another order (shuffle butterflies),
    // which changes float results only by rounding: tests compare within tolerances.
    std::vector<SimValue> values(members);
    for (int64_t m = 0; m < members; ++m) values[m] = scalars_[s.var][thread(m)];
    for (int64_t step = 1; step < members; step *= 2) {
      for (int64_t m = 0; m + step < members; m += 2 * step) {
        const SimValue pair[2] = {values[m], values[m + step]};
        values[m] = simElementwise(combine, dtype, pair, dtypes);
      }
    }
    for (int64_t m = 0; m < members; ++m) scalars_[s.var][thread(m)] = values[0];
  }
}

}  // namespace sim

void simulate(const Kernel& kernel, const SimLaunch& launch) { sim::Simulator(kernel, launch).run(); }

void simulate(const Kernel& kernel, std::vector<HostTensor*> tensors) {
  SimLaunch launch;
  for (HostTensor* t : tensors) launch.tensors.push_back(t->data());
  launch.grid = kernel.grid;
  for (const ScalarArgument& a : kernel.arguments) launch.arguments.push_back(a.value);
  simulate(kernel, launch);
}

}  // namespace braze::kernel
