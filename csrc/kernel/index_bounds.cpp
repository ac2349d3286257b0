// KernelBuilder::bounds: interval arithmetic on index expressions, saturating at +-2^62 (wider than any
// index a kernel computes), so a fold is decided only where both ends are known.
#include "kernel/kernel_ir.h"
#include "support/by_id.h"
#include "support/error.h"

#include <algorithm>

namespace braze::kernel {
namespace {

constexpr int64_t kLimit = int64_t{1} << 62;

int64_t clampLimit(__int128 v) { return static_cast<int64_t>(std::clamp<__int128>(v, -kLimit, kLimit)); }

using Bounds = KernelBuilder::Bounds;

std::optional<Bounds> product(const Bounds& a, const Bounds& b) {
  const __int128 c[4] = {static_cast<__int128>(a.lo) * b.lo, static_cast<__int128>(a.lo) * b.hi,
                         static_cast<__int128>(a.hi) * b.lo, static_cast<__int128>(a.hi) * b.hi};
  return Bounds{clampLimit(*std::min_element(c, c + 4)), clampLimit(*std::max_element(c, c + 4))};
}

}  // namespace

void KernelBuilder::fixBlock(int64_t x, int64_t y) {
  BRAZE_ASSERT(x >= 1 && y >= 1 && x * y <= 1024, "kernel block {}x{}", x, y);
  k_.block = {x, y};
  thread_limit_ = {x, y};
  ++memo_epoch_;
}

void KernelBuilder::setVarBounds(VarId var, std::optional<Bounds> b) {
  entryAt(var_bounds_, static_cast<size_t>(var)) = b;
  ++memo_epoch_;
}

// Narrows `b`, the bounds of `value`, by what `cond` (a conjunction of comparisons) says of it where it holds.
void KernelBuilder::refine(ExprId cond, ExprId value, Bounds& b) const {
  const KExpr& c = k_.exprs[cond];
  if (c.kind == EKind::And) {
    refine(c.args[0], value, b);
    refine(c.args[1], value, b);
    return;
  }
  if (c.kind != EKind::Lt && c.kind != EKind::Le) return;
  const int64_t strict = c.kind == EKind::Lt ? 1 : 0;
  if (c.args[0] == value) {  // value < k (value <= k)
    if (auto k = bounds(c.args[1])) b.hi = std::min(b.hi, k->hi - strict);
  } else if (c.args[1] == value) {  // k < value (k <= value)
    if (auto k = bounds(c.args[0])) b.lo = std::max(b.lo, k->lo + strict);
  }
}

std::optional<KernelBuilder::Bounds> KernelBuilder::bounds(ExprId id) const {
  if (entryOr(bounds_epoch_, static_cast<size_t>(id), uint32_t{0}) == memo_epoch_) return bounds_memo_[id];
  const KExpr& e = k_.exprs[id];
  auto arg = [&](int i) { return bounds(e.args[i]); };
  std::optional<Bounds> result;
  switch (e.kind) {
    case EKind::ConstInt:
      if (e.index) result = Bounds{e.i, e.i};
      break;
    case EKind::ThreadIdx: result = Bounds{0, e.i < 2 ? thread_limit_[static_cast<size_t>(e.i)] - 1 : 1023}; break;
    case EKind::BlockIdx: result = Bounds{0, (int64_t{1} << 31) - 2}; break;
    case EKind::ClusterRank: result = Bounds{0, k_.cluster - 1}; break;
    case EKind::VarRef:
      result = entryOr(var_bounds_, static_cast<size_t>(e.ref), std::optional<Bounds>{});  // -1: none
      break;
    case EKind::Add:
      if (auto a = arg(0), b = arg(1); a && b) {
        result = Bounds{clampLimit(static_cast<__int128>(a->lo) + b->lo), clampLimit(static_cast<__int128>(a->hi) + b->hi)};
      }
      break;
    case EKind::Sub:
      if (auto a = arg(0), b = arg(1); a && b) {
        result = Bounds{clampLimit(static_cast<__int128>(a->lo) - b->hi), clampLimit(static_cast<__int128>(a->hi) - b->lo)};
      }
      break;
    case EKind::Mul:
      if (auto a = arg(0), b = arg(1); a && b) result = product(*a, *b);
      break;
    case EKind::Div:  // C++ truncates: exact bounds for a non-negative dividend and a positive divisor
      if (auto a = arg(0), b = arg(1); a && b && a->lo >= 0 && b->lo > 0) result = Bounds{a->lo / b->hi, a->hi / b->lo};
      break;
    case EKind::Mod:
      if (auto a = arg(0), b = arg(1); a && b && a->lo >= 0 && b->lo > 0) {
        result = a->hi < b->lo ? *a : Bounds{0, b->hi - 1};
      }
      break;
    case EKind::Min:
      if (auto a = arg(0), b = arg(1); a && b) result = Bounds{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      break;
    case EKind::WarpUniform:
      if (auto a = arg(0)) result = *a;
      break;
    case EKind::OrderKey: result = Bounds{0, (int64_t{1} << 32) - 1}; break;
    case EKind::BitAnd:  // at most either
      if (auto a = arg(0), b = arg(1); a && b && a->lo >= 0 && b->lo >= 0) result = Bounds{0, std::min(a->hi, b->hi)};
      break;
    case EKind::Xor:  // below the next power of two above both
      if (auto a = arg(0), b = arg(1); a && b && a->lo >= 0 && b->lo >= 0) {
        int64_t top = 1;
        while (top <= std::max(a->hi, b->hi)) top *= 2;
        result = Bounds{0, top - 1};
      }
      break;
    case EKind::Select:
      if (!e.index) break;
      if (auto a = bounds(e.args[1]), b = bounds(e.args[2]); a && b) {
        refine(e.args[0], e.args[1], *a);  // the chosen value passed the condition: `i < n ? i : 0`
        if (a->lo > a->hi) {
          result = b;
        } else {
          result = Bounds{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
        }
      }
      break;
    case EKind::CheckedIndex:  // a value outside [0, extent) becomes 0
      if (auto extent = arg(1); extent && extent->hi > 0) result = Bounds{0, extent->hi - 1};
      break;
    default: break;  // launch arguments, loads, values: unknown
  }
  if (result && (result->lo <= -kLimit || result->hi >= kLimit)) result.reset();
  entryAt(bounds_epoch_, static_cast<size_t>(id), uint32_t{0}) = memo_epoch_;
  entryAt(bounds_memo_, static_cast<size_t>(id)) = result;
  return result;
}

}  // namespace braze::kernel
