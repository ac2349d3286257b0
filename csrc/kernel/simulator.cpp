#include "kernel/simulator.h"

#include "support/error.h"
#include "ir/random_numbers.h"
#include "kernel/element_math.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <unordered_map>

namespace braze::kernel {
namespace {

using Mask = std::vector<char>;

class Simulator {
 public:
  Simulator(const Kernel& k, const SimLaunch& launch)
      : k_(k), grid_(launch.grid), arguments_(launch.arguments), stats_(launch.stats) {
    BRAZE_ASSERT(launch.tensors.size() == k.tensors.size(), "kernel {} takes {} tensors, got {}", k.name,
                 k.tensors.size(), launch.tensors.size());
    BRAZE_ASSERT(arguments_.size() == k.arguments.size(), "kernel {} takes {} scalar arguments, got {}", k.name,
                 k.arguments.size(), arguments_.size());
    BRAZE_ASSERT(launch.extents.empty() || launch.extents.size() == k.tensors.size(),
                 "kernel {}: {} tensor extents for {} tensors", k.name, launch.extents.size(), k.tensors.size());
    for (size_t t = 0; t < k.tensors.size(); ++t) {
      tensors_.push_back(HostTensor::wrap(launch.tensors[t], k.tensors[t].dtype, {}, {}));
    }
    threads_ = k.threadsPerBlock();
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

  // Blocks run one at a time, in a scrambled (but reproducible) order: a GPU promises no order, and
  // code that assumed one (say, that the last block of a grid reduction is the one with the highest
  // index) would fail here too.
  void run() {
    const int64_t blocks = grid_[0] * grid_[1];
    std::vector<int64_t> order(blocks);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(std::hash<std::string>{}(k_.name));
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t b : order) {
      block_ = {b % grid_[0], b / grid_[0]};
      pending_.clear();
      groups_.clear();
      in_flight_.clear();
      wgmma_groups_.clear();
      wgmma_pending_.clear();
      wgmma_reading_.clear();
      busy_accumulators_.clear();
      unfenced_.clear();
      unfenced_list_.clear();
      exec(k_.body, Mask(threads_, 1));
    }
  }

 private:
  [[noreturn]] void fail(int64_t t, const std::string& what) const {
    throwError(ErrorKind::Index, __FILE__, __LINE__,
               fmt::format("kernel {}: {} (block ({}, {}), thread ({}, {}))", k_.name, what, block_[0], block_[1],
                           t % k_.block[0], t / k_.block[0]));
  }

  void checkAccess(int64_t t, TensorId tensor, int64_t offset, int64_t width) const {
    const auto [lo, hi] = bounds_[tensor];
    if (offset < lo || offset + width - 1 > hi) {
      fail(t, fmt::format("{} access of {} at element offset {} is outside [{}, {}]", width > 1 ? "vector" : "scalar",
                          k_.tensors[tensor].name, offset, lo, hi));
    }
  }

  SimValue read(TensorId tensor, int64_t offset) const {
    const HostTensor& h = tensors_[tensor];
    SimValue v;
    if (isFloating(h.dtype())) {
      v.f = h.readDouble(offset);
    } else {
      v.i = h.readInt(offset);
    }
    return v;
  }

  void write(TensorId tensor, int64_t offset, SimValue v) {
    HostTensor& h = tensors_[tensor];
    if (isFloating(h.dtype())) {
      h.writeDouble(offset, v.f);
    } else {
      h.writeInt(offset, v.i);
    }
  }

  int64_t indexValue(int64_t v, int64_t t) const {
    // The emitted CUDA computes indices in 32 bits unless the kernel asked for 64, where an overflow is
    // undefined behaviour: report it (the lowering should have chosen 64-bit indexing).
    if (!k_.index64 && v != static_cast<int64_t>(static_cast<int32_t>(v))) {
      fail(t, fmt::format("32-bit index arithmetic overflows: {}", v));
    }
    return v;
  }

  SimValue eval(ExprId id, int64_t t) {
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
      case EKind::ThreadIdx: r.i = e.i == 0 ? t % k_.block[0] : t / k_.block[0]; return r;
      case EKind::BlockIdx: r.i = block_[e.i]; return r;
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

  SimValue& arrayAt(VarId var, int64_t t, int64_t i) {
    const KVar& v = k_.vars[var];
    const bool shared = v.kind == VarKind::SharedArray;
    if (i < 0 || i >= v.size) {
      fail(t, fmt::format("index {} outside {} array {}[{}]", i, shared ? "shared" : "local", v.name, v.size));
    }
    return arrays_[var][shared ? i : t * v.size + i];
  }

  // Lockstep execution would hide a missing barrier, so shared accesses are checked instead: between
  // two barriers, an element one thread wrote may be read or written by no other thread, and an
  // element read by one thread may not be written by another.
  void noteShared(VarId var, int64_t t, int64_t i, bool write) {
    if (i < 0 || i >= k_.vars[var].size) return;  // arrayAt reports it
    SharedAccess& a = shared_[var][i];
    const KVar& v = k_.vars[var];
    if (a.epoch != epoch_) a = SharedAccess{epoch_, -1, -1};
    if (a.writer >= 0 && a.writer != t) {
      fail(t, fmt::format("{} shared {}[{}], which thread {} wrote, with no barrier in between", write ? "writes" : "reads",
                          v.name, i, a.writer));
    }
    if (write) {
      if (auto it = wgmma_reading_.find(var); it != wgmma_reading_.end() && it->second[i] > 0) {
        fail(t, fmt::format("writes shared {}[{}], which a wgmma still in flight reads (no wgmma wait covers it)", v.name, i));
      }
      if (a.reader >= 0 && a.reader != t) {
        fail(t, fmt::format("writes shared {}[{}], which {} read, with no barrier in between", v.name, i,
                            a.reader == kManyReaders ? std::string("other threads") : fmt::format("thread {}", a.reader)));
      }
      a.writer = t;
    } else {
      a.reader = a.reader < 0 || a.reader == t ? t : kManyReaders;
    }
  }

  // A shared element some cp.async still has in flight (issued, not yet covered by a wait of its
  // thread) may not be read: on a GPU it could hold the old or the new bytes.
  void requireLanded(VarId var, int64_t t, int64_t i) {
    auto it = in_flight_.find(var);
    if (it == in_flight_.end() || i < 0 || i >= static_cast<int64_t>(it->second.size()) || it->second[i] == 0) return;
    fail(t, fmt::format("reads shared {}[{}] while a cp.async into it is in flight (no cp.async wait covers it)",
                        k_.vars[var].name, i));
  }

  struct PendingCopy {
    VarId var = -1;
    int64_t at = 0;
    std::vector<SimValue> values;
    int64_t group = -1;  // -1 until committed
  };

  void execCpAsync(const Stmt& s, const Mask& mask) {
    const KVar& v = k_.vars[s.var];
    const int64_t element = sizeOf(v.dtype);
    const int64_t bytes = s.width * element;
    auto& flight = in_flight_[s.var];
    if (flight.empty()) flight.assign(v.size, 0);
    for (int64_t t = 0; t < threads_; ++t) {
      if (!mask[t]) continue;
      const int64_t offset = eval(s.a, t).i, at = eval(s.b, t).i, src_bytes = eval(s.c, t).i;
      if (src_bytes < 0 || src_bytes > bytes) fail(t, fmt::format("cp.async reads {} of its {} bytes", src_bytes, bytes));
      if ((v.shared_offset + at * element) % bytes != 0) {
        fail(t, fmt::format("cp.async of {} bytes into {}[{}]: the shared address is not {}-byte aligned", bytes, v.name,
                            at, bytes));
      }
      PendingCopy copy{s.var, at, std::vector<SimValue>(s.width, SimValue{0.0, 0}), -1};
      const int64_t elements = src_bytes / element;
      if (elements > 0) {
        checkAccess(t, s.tensor, offset, elements);
        const auto address = reinterpret_cast<uintptr_t>(tensors_[s.tensor].data()) + offset * element;
        if (address % bytes != 0) {
          fail(t, fmt::format("cp.async of {} bytes from {} at element offset {} is misaligned (address % {} = {})",
                              bytes, k_.tensors[s.tensor].name, offset, bytes, address % bytes));
        }
      }
      for (int64_t j = 0; j < elements; ++j) copy.values[j] = read(s.tensor, offset + j);
      for (int64_t j = 0; j < s.width; ++j) {
        if (at + j < 0 || at + j >= v.size) fail(t, fmt::format("cp.async into {}[{}] outside its {} elements", v.name, at + j, v.size));
        // The copy may land at once: it is this thread's write from its issue on, so a read of the element
        // by another thread since the last barrier (a stage refilled while still being read) is reported.
        noteShared(s.var, t, at + j, true);
        ++flight[at + j];
      }
      pending_[t].push_back(std::move(copy));
    }
  }

  void execCpAsyncCommit(const Mask& mask) {
    for (int64_t t = 0; t < threads_; ++t) {
      if (!mask[t]) continue;
      for (PendingCopy& copy : pending_[t]) {
        if (copy.group < 0) copy.group = groups_[t];
      }
      ++groups_[t];
    }
  }

  // Lands every copy of the thread's committed groups but the newest `in_flight` ones, as the thread's
  // writes (a barrier is still needed before other threads read them).
  void execCpAsyncWait(const Stmt& s, const Mask& mask) {
    for (int64_t t = 0; t < threads_; ++t) {
      if (!mask[t]) continue;
      auto& copies = pending_[t];
      const int64_t newest_kept = groups_[t] - s.width;  // groups below this one land
      std::vector<PendingCopy> kept;
      for (PendingCopy& copy : copies) {
        if (copy.group < 0 || copy.group >= newest_kept) {
          kept.push_back(std::move(copy));
          continue;
        }
        auto& flight = in_flight_[copy.var];
        for (size_t j = 0; j < copy.values.size(); ++j) {
          --flight[copy.at + static_cast<int64_t>(j)];
          noteShared(copy.var, t, copy.at + static_cast<int64_t>(j), true);
          noteUnfenced(copy.var, t, copy.at + static_cast<int64_t>(j));
          arrayAt(copy.var, t, copy.at + static_cast<int64_t>(j)) = copy.values[j];
        }
      }
      copies = std::move(kept);
    }
  }

  // Per warp: each lane's row address, the PTX distribution of the rows' 4-byte pieces, and the bank
  // conflicts of each 8-row phase (a phase is conflict-free when its eight 16-byte rows fall in eight
  // distinct 16-byte bank groups of the 128-byte bank line).
  void execLdmatrix(const Stmt& s, const Mask& mask) {
    const VarId from = s.mma_operands[0];
    const KVar& src = k_.vars[from];
    const int64_t element = sizeOf(src.dtype);
    const int64_t row_elements = 16 / element, per = 4 / element;
    for (int64_t warp = 0; warp * 32 < threads_; ++warp) {
      int64_t active = 0;
      for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) active += mask[t] ? 1 : 0;
      if (active == 0) continue;
      for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) {
        if (!mask[t]) fail(t, "ldmatrix reached by only part of its warp (this lane is inactive)");
      }
      std::vector<int64_t> rows(8 * s.width);
      for (int64_t r = 0; r < 8 * s.width; ++r) {
        const int64_t t = warp * 32 + r;
        rows[r] = eval(s.a, t).i;
        if ((src.shared_offset + rows[r] * element) % 16 != 0) {
          fail(t, fmt::format("ldmatrix row {}[{}] is not 16-byte aligned", src.name, rows[r]));
        }
        for (int64_t j = 0; j < row_elements; ++j) {
          requireLanded(from, t, rows[r] + j);
          noteShared(from, t, rows[r] + j, false);
        }
      }
      for (int64_t m = 0; m < s.width; ++m) {
        std::array<int, 8> groups{};
        for (int64_t r = 0; r < 8; ++r) ++groups[((src.shared_offset + rows[m * 8 + r] * element) / 16) % 8];
        if (stats_ != nullptr) {
          ++stats_->ldmatrix_phases;
          stats_->ldmatrix_bank_conflicts += *std::max_element(groups.begin(), groups.end()) - 1;
        }
      }
      for (int64_t lane = 0; lane < 32; ++lane) {
        const int64_t t = warp * 32 + lane;
        const int64_t at = eval(s.b, t).i;
        for (int64_t m = 0; m < s.width; ++m) {
          for (int64_t i = 0; i < per; ++i) {
            // Not transposed: row lane / 4, elements per * (lane % 4) + i. Transposed (16-bit): column
            // lane / 4 of rows 2 (lane % 4) + i.
            const int64_t index = s.transpose ? rows[m * 8 + 2 * (lane % 4) + i] + lane / 4
                                              : rows[m * 8 + lane / 4] + per * (lane % 4) + i;
            arrayAt(s.var, t, at + m * per + i) = arrayAt(from, t, index);
          }
        }
      }
    }
  }

  void requireFullBlock(const Mask& mask, const char* what) {
    for (int64_t t = 0; t < threads_; ++t) {
      if (!mask[t]) fail(t, fmt::format("{} reached by only part of the block (this thread is inactive)", what));
    }
  }

  void exec(const std::vector<Stmt>& stmts, const Mask& mask) {
    for (const Stmt& s : stmts) execOne(s, mask);
  }

  void execOne(const Stmt& s, const Mask& mask) {
    switch (s.kind) {
      case SKind::Let:
      case SKind::Assign:
        for (int64_t t = 0; t < threads_; ++t) {
          if (mask[t]) scalars_[s.var][t] = eval(s.a, t);
        }
        return;
      case SKind::Declare: {
        const KVar& v = k_.vars[s.var];
        // Poison: a read before a write shows up as NaN (or an absurd integer) in the results.
        const bool shared = v.kind == VarKind::SharedArray;
        arrays_[s.var].assign((shared ? 1 : threads_) * v.size,
                              SimValue{std::numeric_limits<double>::quiet_NaN(), -123456789});
        if (shared) shared_[s.var].assign(v.size, SharedAccess{});
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
            noteShared(s.var, t, writes[t].first, true);
            noteUnfenced(s.var, t, writes[t].first);
          } else {
            requireAccumulatorsDone(s.var, t);
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
      case SKind::WgmmaFence: return;  // register order: the simulator runs statements in order
      case SKind::WgmmaCommit: execWgmmaCommit(mask); return;
      case SKind::WgmmaWait: execWgmmaWait(s, mask); return;
      case SKind::ProxyFence:
        for (int64_t t = 0; t < threads_; ++t) {
          if (!mask[t]) continue;
          for (const auto& [var, i] : unfenced_list_[t]) {
            if (unfenced_[var][i] == t + 1) unfenced_[var][i] = 0;
          }
          unfenced_list_[t].clear();
        }
        return;
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
      case SKind::Barrier:
        requireFullBlock(mask, "a barrier");
        ++epoch_;
        return;
    }
  }

  void execFor(const Stmt& s, Mask mask) {
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

  void execVector(const Stmt& s, const Mask& mask) {
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

  // Gathers each warp's A, B and C from its lanes' fragments by the PTX layouts, computes D = A B + C
  // and scatters D back. Float: the k products (exact for bf16, f16 and fp8 operands) and C summed in double,
  // then rounded to float; tensor cores sum in an order and precision PTX leaves open, so a GPU may
  // differ in the last bits. Integer: exact, wrapped to int32.
  void execMma(const Stmt& s, const Mask& mask) {
    const MmaDims dims = mmaDims(s.mma_shape);
    const bool integer = mmaAccumulator(s.mma_shape, k_.vars[s.mma_operands[0]].dtype) == DataType::Int32;
    const VarId a = s.mma_operands[0], b = s.mma_operands[1], c = s.mma_operands[2];
    for (int64_t warp = 0; warp * 32 < threads_; ++warp) {
      // A warp that did not reach the mma (a warp-uniform branch) takes no part; a partial one is an error.
      int64_t active = 0;
      for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) active += mask[t] ? 1 : 0;
      if (active == 0) continue;
      for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) {
        if (!mask[t]) fail(t, fmt::format("mma.{} reached by only part of its warp (this lane is inactive)", toString(s.mma_shape)));
      }
      std::vector<double> fa(dims.m * dims.k), fb(dims.k * dims.n), fc(dims.m * dims.n);
      for (int lane = 0; lane < 32; ++lane) {
        const int64_t t = warp * 32 + lane;
        auto value = [&](VarId var, int i) {
          const SimValue& v = arrayAt(var, t, i);
          return integer ? static_cast<double>(v.i) : v.f;
        };
        for (int i = 0; i < dims.a_values; ++i) {
          const MatrixPosition p = mmaAPosition(s.mma_shape, lane, i);
          fa[p.row * dims.k + p.col] = value(a, i);
        }
        for (int i = 0; i < dims.b_values; ++i) {
          const MatrixPosition p = mmaBPosition(s.mma_shape, lane, i);
          fb[p.row * dims.n + p.col] = value(b, s.b_offset + i);
        }
        for (int i = 0; i < dims.c_values; ++i) {
          const MatrixPosition p = mmaCPosition(lane, i);
          fc[p.row * dims.n + p.col] = value(c, i);
        }
      }
      for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < dims.c_values; ++i) {
          const MatrixPosition p = mmaCPosition(lane, i);
          SimValue& d = arrayAt(s.var, warp * 32 + lane, i);
          if (integer) {
            int64_t sum = static_cast<int64_t>(fc[p.row * dims.n + p.col]);
            for (int k = 0; k < dims.k; ++k) {
              sum += static_cast<int64_t>(fa[p.row * dims.k + k]) * static_cast<int64_t>(fb[k * dims.n + p.col]);
            }
            d.i = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)));
          } else {
            double sum = 0;
            for (int k = 0; k < dims.k; ++k) sum += fa[p.row * dims.k + k] * fb[k * dims.n + p.col];
            d.f = static_cast<float>(sum + fc[p.row * dims.n + p.col]);
          }
        }
      }
    }
  }

  // The threads of warpgroup g that reached a warpgroup statement: all of them, or none (a partial one is
  // an error).
  bool warpgroupActive(int64_t g, const Mask& mask, const char* what) {
    int64_t active = 0;
    for (int64_t t = g * 128; t < g * 128 + 128; ++t) active += mask[t] ? 1 : 0;
    if (active == 0) return false;
    for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
      if (!mask[t]) fail(t, fmt::format("{} reached by only part of its warpgroup (this thread is inactive)", what));
    }
    return true;
  }

  // Reads A and B where the hardware would (kernel/wgmma.h), computes the warpgroup's 64 x n product
  // into its accumulators (float: exact products summed in double, rounded to float once per wgmma;
  // integer: exact, wrapped to int32), and
  // keeps the operand elements and the accumulators busy until a wgmma wait covers the group.
  void execWgmma(const Stmt& s, const Mask& mask) {
    const int64_t n = s.width;
    const DataType operand_dtype = k_.vars[s.mma_operands[0]].dtype;
    const bool integer = !isFloating(operand_dtype);
    const int64_t depth = wgmmaK(sizeOf(operand_dtype));
    for (int64_t g = 0; g * 128 < threads_; ++g) {
      if (!warpgroupActive(g, mask, "wgmma")) continue;
      WgmmaInFlight flight{s.var, {}, -1};
      std::vector<double> matrices[2] = {std::vector<double>(kWgmmaM * depth), std::vector<double>(depth * n)};
      for (int operand = 0; operand < 2; ++operand) {
        const VarId var = s.mma_operands[operand];
        const KVar& v = k_.vars[var];
        const int64_t element = sizeOf(v.dtype);
        const int64_t at = eval(operand == 0 ? s.a : s.b, g * 128).i;
        for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
          if (eval(operand == 0 ? s.a : s.b, t).i != at) fail(t, "wgmma operand start differs within the warpgroup");
        }
        const int64_t start = v.shared_offset + at * element;
        const int64_t mn_extent = operand == 0 ? kWgmmaM : n;
        auto& reading = wgmma_reading_[var];
        if (reading.empty()) reading.assign(v.size, 0);
        for (int64_t mn = 0; mn < mn_extent; ++mn) {
          for (int64_t k = 0; k < depth; ++k) {
            const int64_t byte = wgmmaElementByte(s.wgmma_operands[operand], start, mn, k, element) - v.shared_offset;
            if (byte % element != 0 || byte < 0 || byte / element >= v.size) {
              fail(g * 128, fmt::format("wgmma reads {} element ({}, {}) at shared byte {}, outside its {} elements",
                                        v.name, mn, k, byte + v.shared_offset, v.size));
            }
            const int64_t i = byte / element;
            requireLanded(var, g * 128, i);
            noteShared(var, g * 128, i, false);
            if (auto it = unfenced_.find(var); it != unfenced_.end() && it->second[i] != 0) {
              fail(g * 128, fmt::format("wgmma reads shared {}[{}], which thread {} wrote with no proxy fence after the write",
                                        v.name, i, it->second[i] - 1));
            }
            ++reading[i];
            flight.reads.emplace_back(var, i);
            const SimValue& held = arrayAt(var, g * 128, i);
            const double value = integer ? static_cast<double>(held.i) : held.f;
            if (operand == 0) {
              matrices[0][mn * depth + k] = value;
            } else {
              matrices[1][k * n + mn] = value;
            }
          }
        }
      }
      for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
        requireAccumulatorsDone(s.var, t, true);
        for (int64_t i = 0; i < n / 2; ++i) {
          const MatrixPosition p = wgmmaDPosition(static_cast<int>(t - g * 128), static_cast<int>(i));
          SimValue& d = arrayAt(s.var, t, i);
          if (integer) {  // exact, wrapped to int32 as s32 accumulators without .satfinite are
            int64_t sum = d.i;
            for (int64_t k = 0; k < depth; ++k) {
              sum += static_cast<int64_t>(matrices[0][p.row * depth + k]) * static_cast<int64_t>(matrices[1][k * n + p.col]);
            }
            d.i = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)));
          } else {
            double sum = 0;
            for (int64_t k = 0; k < depth; ++k) sum += matrices[0][p.row * depth + k] * matrices[1][k * n + p.col];
            d.f = static_cast<float>(sum + d.f);
          }
        }
      }
      ++busy_accumulators_[{g, s.var}];
      wgmma_pending_[g].push_back(std::move(flight));
    }
  }

  void execWgmmaCommit(const Mask& mask) {
    for (int64_t g = 0; g * 128 < threads_; ++g) {
      if (!warpgroupActive(g, mask, "wgmma commit")) continue;
      for (WgmmaInFlight& w : wgmma_pending_[g]) {
        if (w.group < 0) w.group = wgmma_groups_[g];
      }
      ++wgmma_groups_[g];
    }
  }

  void execWgmmaWait(const Stmt& s, const Mask& mask) {
    for (int64_t g = 0; g * 128 < threads_; ++g) {
      if (!warpgroupActive(g, mask, "wgmma wait")) continue;
      const int64_t newest_kept = wgmma_groups_[g] - s.width;
      std::vector<WgmmaInFlight> kept;
      for (WgmmaInFlight& w : wgmma_pending_[g]) {
        if (w.group < 0 || w.group >= newest_kept) {
          kept.push_back(std::move(w));
          continue;
        }
        for (const auto& [var, i] : w.reads) --wgmma_reading_[var][i];
        if (--busy_accumulators_[{g, w.accumulators}] == 0) busy_accumulators_.erase({g, w.accumulators});
      }
      wgmma_pending_[g] = std::move(kept);
    }
  }

  // Accumulators of a wgmma in flight may be neither read nor written (`by_wgmma`: another wgmma into
  // them, which chains after it, is allowed).
  void requireAccumulatorsDone(VarId var, int64_t t, bool by_wgmma = false) {
    if (by_wgmma || busy_accumulators_.empty() || !busy_accumulators_.count({t / 128, var})) return;
    fail(t, fmt::format("touches {}, the accumulators of a wgmma in flight (no wgmma wait covers it)", k_.vars[var].name));
  }

  void noteUnfenced(VarId var, int64_t t, int64_t i) {
    if (!k_.arch_specific) return;  // no wgmma reads the writes
    auto& marks = unfenced_[var];
    if (marks.empty()) marks.assign(k_.vars[var].size, 0);
    marks[i] = static_cast<int32_t>(t + 1);
    unfenced_list_[t].emplace_back(var, i);
  }

  void execReduce(const Stmt& s, const Mask& mask) {
    requireFullBlock(mask, "a block reduction");
    // The emitted reduction synchronizes the block unless it is a warp shuffle (see the emitter).
    if (!(s.axis == 0 && k_.block[0] <= k_.warp_size && k_.vars[s.var].dtype != DataType::Bool)) ++epoch_;
    const DataType dtype = k_.vars[s.var].dtype;
    const OpKind combine = combineOf(s.reduce);
    const int64_t bx = k_.block[0], by = k_.block[1];
    const int64_t groups = s.axis == 0 ? by : bx;
    const int64_t members = s.axis == 0 ? bx : by;
    auto thread = [&](int64_t g, int64_t m) { return s.axis == 0 ? g * bx + m : m * bx + g; };
    const DataType dtypes[2] = {dtype, dtype};
    for (int64_t g = 0; g < groups; ++g) {
      // A tree of pairs at distance 1, 2, 4... The GPU combines in another order (shuffle butterflies),
      // which changes float results only by rounding: tests compare within tolerances.
      std::vector<SimValue> values(members);
      for (int64_t m = 0; m < members; ++m) values[m] = scalars_[s.var][thread(g, m)];
      for (int64_t step = 1; step < members; step *= 2) {
        for (int64_t m = 0; m + step < members; m += 2 * step) {
          const SimValue pair[2] = {values[m], values[m + step]};
          values[m] = simElementwise(combine, dtype, pair, dtypes);
        }
      }
      for (int64_t m = 0; m < members; ++m) scalars_[s.var][thread(g, m)] = values[0];
    }
  }

  const Kernel& k_;
  std::array<int64_t, 2> grid_;
  const std::vector<ScalarValue>& arguments_;
  std::vector<HostTensor> tensors_;  // each parameter's base address, with its dtype
  int64_t threads_ = 1;
  std::array<int64_t, 2> block_{0, 0};
  std::vector<std::vector<SimValue>> scalars_;
  std::vector<std::vector<SimValue>> arrays_;
  std::vector<std::pair<int64_t, int64_t>> bounds_;
  struct SharedAccess {
    int64_t epoch = -1;
    int64_t writer = -1;
    int64_t reader = -1;
  };
  static constexpr int64_t kManyReaders = -2;
  std::unordered_map<VarId, std::vector<SharedAccess>> shared_;
  int64_t epoch_ = 0;  // barriers passed by the block
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
};

}  // namespace

void simulate(const Kernel& kernel, const SimLaunch& launch) { Simulator(kernel, launch).run(); }

void simulate(const Kernel& kernel, std::vector<HostTensor*> tensors) {
  SimLaunch launch;
  for (HostTensor* t : tensors) launch.tensors.push_back(t->data());
  launch.grid = kernel.grid;
  for (const ScalarArgument& a : kernel.arguments) launch.arguments.push_back(a.value);
  simulate(kernel, launch);
}

}  // namespace braze::kernel
