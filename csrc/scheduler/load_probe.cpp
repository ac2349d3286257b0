#include "scheduler/load_probe.h"

#include "support/error.h"
#include "scheduler/lowering_context.h"

#include <algorithm>
#include <unordered_map>

namespace braze::scheduler {
namespace {

// The value of an index expression with some vars set; nullopt when it reads anything else (another
// var, a load, a thread index).
class IndexEvaluator {
 public:
  IndexEvaluator(const Kernel& k, const std::unordered_map<VarId, int64_t>& vars) : k_(k), vars_(vars) {}

  // Memoized: a cat's or pad's offsets share subexpressions, and a walk without memo would revisit
  // them once per path.
  std::optional<int64_t> eval(ExprId id) {
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
    const std::optional<int64_t> v = compute(k_.exprs[id]);
    memo_.emplace(id, v);
    return v;
  }

 private:
  std::optional<int64_t> compute(const KExpr& e) {
    switch (e.kind) {
      case EKind::ConstInt:
      case EKind::ConstBool: return e.i;
      case EKind::Argument: {
        const ScalarArgument& a = k_.arguments[e.ref];
        if (!a.index) return std::nullopt;  // data (a scalar input), not index arithmetic
        return toInt(a.value);
      }
      case EKind::VarRef: {
        auto it = vars_.find(e.ref);
        if (it == vars_.end()) return std::nullopt;
        return it->second;
      }
      case EKind::Not: {
        auto a = eval(e.args[0]);
        if (!a) return std::nullopt;
        return int64_t{*a == 0};
      }
      case EKind::Select: {
        auto c = eval(e.args[0]);
        if (!c) return std::nullopt;
        return eval(e.args[*c != 0 ? 1 : 2]);
      }
      case EKind::Add:
      case EKind::Sub:
      case EKind::Mul:
      case EKind::Div:
      case EKind::Mod:
      case EKind::Min:
      case EKind::Xor:
      case EKind::BitAnd:
      case EKind::Lt:
      case EKind::Le:
      case EKind::Eq:
      case EKind::And:
      case EKind::Or: {
        auto a = eval(e.args[0]), b = eval(e.args[1]);
        if (!a || !b) return std::nullopt;
        return binary(e.kind, *a, *b);
      }
      default: return std::nullopt;  // thread or block indices, loads, data converted to an index
    }
  }

  static std::optional<int64_t> binary(EKind kind, int64_t a, int64_t b) {
    switch (kind) {
      case EKind::Add: return a + b;
      case EKind::Sub: return a - b;
      case EKind::Mul: return a * b;
      case EKind::Div: return b == 0 ? std::nullopt : std::optional<int64_t>(a / b);
      case EKind::Mod: return b == 0 ? std::nullopt : std::optional<int64_t>(a % b);
      case EKind::Min: return std::min(a, b);
      case EKind::Xor: return a ^ b;
      case EKind::BitAnd: return a & b;
      case EKind::Lt: return int64_t{a < b};
      case EKind::Le: return int64_t{a <= b};
      case EKind::Eq: return int64_t{a == b};
      case EKind::And: return int64_t{a != 0 && b != 0};
      case EKind::Or: return int64_t{a != 0 || b != 0};
      default: return std::nullopt;
    }
  }

  const Kernel& k_;
  const std::unordered_map<VarId, int64_t>& vars_;
  std::unordered_map<ExprId, std::optional<int64_t>> memo_;
};

// The var values that put `point` at `coords`.
std::unordered_map<VarId, int64_t> varsAt(const SymbolicPoint& point, const std::vector<int64_t>& coords) {
  std::unordered_map<VarId, int64_t> vars;
  for (size_t d = 0; d < coords.size(); ++d) {
    if (point.vars[d] < 0) continue;
    if (static_cast<int64_t>(d) == point.dim_b && point.width > 1) {
      vars[point.vars[d]] = coords[d] / point.width;
      vars[point.lane] = coords[d] % point.width;
    } else {
      vars[point.vars[d]] = coords[d];
    }
  }
  if (point.lane >= 0 && !vars.count(point.lane)) vars[point.lane] = 0;
  return vars;
}

std::optional<std::vector<int64_t>> stridesAtCentre(const Kernel& k, const SymbolicPoint& point, ExprId offset) {
  std::vector<int64_t> centre(point.sizes.size());
  for (size_t d = 0; d < centre.size(); ++d) centre[d] = (std::max<int64_t>(point.sizes[d], 1) - 1) / 2;
  auto at = [&](const std::vector<int64_t>& coords) {
    const auto vars = varsAt(point, coords);
    return IndexEvaluator(k, vars).eval(offset);
  };
  const std::optional<int64_t> origin = at(centre);
  if (!origin) return std::nullopt;
  std::vector<int64_t> strides(centre.size(), 0);
  for (size_t d = 0; d < centre.size(); ++d) {
    if (point.sizes[d] <= 1) continue;
    std::vector<int64_t> step = centre;
    ++step[d];  // inside: the centre of an extent of 2 or more is below its last index
    const std::optional<int64_t> moved = at(step);
    if (!moved) return std::nullopt;
    strides[d] = *moved - *origin;
  }
  return strides;
}

}  // namespace

std::vector<Idx> SymbolicPoint::index(KernelBuilder& kb) const {
  std::vector<Idx> index(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (vars[d] < 0) {
      index[d] = Idx{kb.index(0), false};
    } else if (static_cast<int64_t>(d) == dim_b) {
      index[d] = Idx{kb.mul(kb.ref(vars[d]), kb.index(width)), width > 1};
    } else {
      index[d] = Idx{kb.ref(vars[d]), false};
    }
  }
  return index;
}

std::vector<ProbedLoad> probeLoads(KernelBuilder& kb, ValueBuilder& vb, const SymbolicPoint& point,
                                   const std::vector<const Val*>& outputs) {
  std::vector<ProbedLoad> loads;
  vb.setLoadInterceptor([&](TensorId tensor, ExprId offset) -> std::optional<ExprId> {
    const bool seen = std::any_of(loads.begin(), loads.end(),
                                  [&](const ProbedLoad& l) { return l.tensor == tensor && l.offset == offset; });
    if (!seen) loads.push_back({tensor, offset, std::nullopt});
    return std::nullopt;  // built as usual, into the scratch lists
  });
  Chunk scratch;
  const bool vector = point.width > 1;
  vb.beginChunk(&scratch.pre, vector ? &scratch.body : &scratch.pre, point.width, vector ? kb.ref(point.lane) : -1);
  const std::vector<Idx> index = point.index(kb);
  for (const Val* out : outputs) vb.valueAt(out, index);
  vb.setLoadInterceptor(nullptr);
  for (ProbedLoad& load : loads) load.strides = stridesAtCentre(kb.kernel(), point, load.offset);
  return loads;
}

}  // namespace braze::scheduler
