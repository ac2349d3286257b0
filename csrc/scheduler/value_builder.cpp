#include "scheduler/value_builder.h"

#include "support/error.h"
#include "ir/fusion.h"
#include "ir/shape_rules.h"

#include <algorithm>

namespace braze::scheduler {
int64_t innerExtent(const std::vector<int64_t>& sizes) {
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] > 1) return sizes[d];
  }
  return 1;
}

ValueBuilder::ValueBuilder(KernelBuilder& kb, const BoundShapes& bound, const std::vector<const Expr*>& exprs,
                           std::unordered_map<const Val*, TensorId> params)
    : kb_(kb), bound_(bound), params_(std::move(params)) {
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) defined_[out] = e;
  }
}

void ValueBuilder::beginChunk(std::vector<Stmt>* pre, std::vector<Stmt>* body, int64_t width, ExprId lane) {
  pre_ = pre;
  body_ = body;
  width_ = width;
  lane_ = lane;
  memo_.clear();
  vector_loads_.clear();
  shared_loads_.clear();
  if (lane >= 0) markLaneVar(kb_.expr(lane).ref);
}

size_t ValueBuilder::ValueKeyHash::operator()(const ValueKey& key) const {
  uint64_t h = std::hash<const Val*>()(key.first);
  for (int64_t v : key.second) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}


bool ValueBuilder::laneDependent(ExprId e) {
  if (const int8_t known = entryOr(lane_dependent_, static_cast<size_t>(e), int8_t{-1}); known >= 0) return known != 0;
  const KExpr& x = kb_.expr(e);
  bool dep = false;
  if (x.kind == EKind::VarRef) {
    dep = entryOr(lane_vars_, static_cast<size_t>(x.ref), char{0}) != 0;
  } else {
    for (ExprId a : x.args) dep = dep || laneDependent(a);
  }
  entryAt(lane_dependent_, static_cast<size_t>(e), int8_t{-1}) = dep ? 1 : 0;
  return dep;
}

bool ValueBuilder::invariantExpr(ExprId e) {
  if (isInvariant(e)) return true;
  const KExpr& x = kb_.expr(e);
  switch (x.kind) {
    case EKind::ConstInt:
    case EKind::ConstFloat:
    case EKind::ConstBool:
    case EKind::Argument: return true;
    case EKind::Elementwise:
    case EKind::Cast:
    case EKind::Fma:
    case EKind::Lt:
    case EKind::Le:
    case EKind::Eq:
    case EKind::And:
    case EKind::Or:
    case EKind::Not:
    case EKind::Select: break;
    default: return false;  // variables, thread and block indices, loads, arrays
  }
  for (ExprId a : x.args) {
    if (!invariantExpr(a)) return false;
  }
  markInvariant(e);
  return true;
}

ExprId ValueBuilder::bind(const char* prefix, ExprId value) {
  if (hoist_ != nullptr && kb_.expr(value).kind != EKind::VarRef && invariantExpr(value)) {
    if (auto it = hoisted_.find(value); it != hoisted_.end()) return it->second;
    kb_.pushTarget(hoist_);
    const ExprId bound = kb_.letValue(prefix, value);
    kb_.popTarget();
    markInvariant(bound);
    hoisted_.emplace(value, bound);
    return bound;
  }
  const bool dep = laneDependent(value);
  kb_.pushTarget(dep ? body_ : pre_);
  const ExprId bound = kb_.letValue(prefix, value);
  kb_.popTarget();
  if (dep && kb_.expr(bound).kind == EKind::VarRef) markLaneVar(kb_.expr(bound).ref);
  return bound;
}

ExprId ValueBuilder::materialize(const Idx& i) { return i.lane ? kb_.add(i.base, lane_) : i.base; }

std::vector<Idx> ValueBuilder::unflatten(ExprId linear_base, bool lane, const std::vector<int64_t>& sizes) {
  std::vector<Idx> index(sizes.size());
  // An index space without elements (a zero-size dim: a sum over [3, 0] into [4]) is never indexed at run
  // time, its loops running no iteration and its grids no block: any index stands for it, and its
  // quotients by a zero extent would not be defined.
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) {
    for (Idx& i : index) i.base = kb_.index(0);
    return index;
  }
  const auto strides = StridedLayout::rowMajor(sizes).strides;
  // The outermost dim of size > 1 takes the quotient whole, as dim 0 does: the dims before it have
  // size 1, so a [1, seq] index space is indexed as [seq] is (no modulo naming seq).
  bool outermost = true;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) {
      index[d].base = kb_.index(0);
      continue;
    }
    ExprId q = kb_.div(linear_base, kb_.index(strides[d]));
    if (!outermost) q = kb_.mod(q, kb_.index(sizes[d]));
    outermost = false;
    index[d].base = q;
  }
  // The lane stays on the last dim of size > 1: callers guarantee the base is a multiple of the
  // width and that extent is too, so base + lane never carries into another dim.
  if (lane) {
    for (size_t d = sizes.size(); d-- > 0;) {
      if (sizes[d] > 1) {
        index[d].lane = true;
        return index;
      }
    }
    BRAZE_ASSERT(false, "vectorized index into a tensor of one element");
  }
  return index;
}

namespace {

// An index component as unflatten builds it: (linear / divisor) % modulus (modulus 0: no modulo).
struct Digit {
  ExprId linear = -1;
  int64_t divisor = 1;
  int64_t modulus = 0;
};

Digit digitOf(const KernelBuilder& kb, ExprId base) {
  const KExpr& e = kb.expr(base);
  auto constant = [&](ExprId id) { return kb.constValue(id).value_or(0); };
  if (e.kind == EKind::Mod && constant(e.args[1]) > 0) {
    const KExpr& inner = kb.expr(e.args[0]);
    if (inner.kind == EKind::Div && constant(inner.args[1]) > 0) {
      return {inner.args[0], constant(inner.args[1]), constant(e.args[1])};
    }
    return {e.args[0], 1, constant(e.args[1])};
  }
  if (e.kind == EKind::Div && constant(e.args[1]) > 0) return {e.args[0], constant(e.args[1]), 0};
  return {base, 1, 0};
}

}  // namespace

// Adjacent dims that are digits of one linear index and laid out row-major in this tensor (a
// contiguous input's [batch, seq] over a [batch, seq, hidden] index space) are indexed as one:
// ((L / (k n)) % m) * s n + ((L / k) % n) * s == ((L / k) % (m n)) * s for L >= 0 (index values are).
// Fewer divisions, and the offsets no longer name the merged dims' sizes, so the kernel's source is
// the same for every batch and sequence length that share the rest of the shape.
ExprId ValueBuilder::flatOffset(const StridedLayout& layout, const std::vector<Idx>& index, int64_t* lane_coefficient) {
  BRAZE_ASSERT(layout.sizes.size() == index.size(), "index rank {} for a tensor of rank {}", index.size(),
               layout.sizes.size());
  ExprId offset = kb_.index(layout.offset);
  int64_t coefficient = 0;
  struct Term {
    ExprId base = -1;
    Digit digit;
    int64_t stride = 0;
    bool lane = false;
  };
  std::optional<Term> pending;
  auto flush = [&] {
    if (pending) offset = kb_.add(offset, kb_.mul(pending->base, kb_.index(pending->stride)));
  };
  for (size_t d = 0; d < index.size(); ++d) {
    if (layout.strides[d] == 0 || layout.sizes[d] == 1) continue;
    if (index[d].lane) coefficient += layout.strides[d];
    const Digit digit = digitOf(kb_, index[d].base);
    if (pending && !pending->lane && digit.modulus > 0 && pending->digit.linear == digit.linear &&
        pending->digit.divisor == digit.divisor * digit.modulus && pending->stride == layout.strides[d] * digit.modulus) {
      Digit merged{digit.linear, digit.divisor, pending->digit.modulus * digit.modulus};
      ExprId base = merged.divisor == 1 ? merged.linear : kb_.div(merged.linear, kb_.index(merged.divisor));
      if (merged.modulus > 0) base = kb_.mod(base, kb_.index(merged.modulus));
      pending = Term{base, merged, layout.strides[d], index[d].lane};
      continue;
    }
    flush();
    pending = Term{index[d].base, digit, layout.strides[d], index[d].lane};
  }
  flush();
  *lane_coefficient = coefficient;
  return offset;
}

bool ValueBuilder::wholeVectors(const TensorParam& param, ExprId base, int64_t coefficient) {
  const int64_t bytes = width_ * sizeOf(param.dtype);
  const int64_t access = std::min<int64_t>(bytes, 16);
  return width_ > 1 && coefficient == 1 && !laneDependent(base) && kb_.divisibility(base) % width_ == 0 &&
         bytes % access == 0 && param.alignment_bytes % access == 0;
}

ExprId ValueBuilder::loadAt(TensorId tensor, const std::vector<Idx>& index) {
  const TensorParam& param = kb_.kernel().tensors[tensor];
  int64_t coefficient = 0;
  const ExprId base = flatOffset(param.layout, index, &coefficient);
  if (interceptor_) {
    const ExprId offset = coefficient == 0 ? base : kb_.add(base, kb_.mul(lane_, kb_.index(coefficient)));
    if (auto value = interceptor_(tensor, offset)) return bind("s", *value);
  }
  // A chunk wider than 16 bytes of this tensor (a matmul's bf16 activations beside its int8 weights) is
  // read as several 16-byte vectors.
  const bool vector = wholeVectors(param, base, coefficient);
  auto vectorLoads = [&](VarId array, ExprId at) {
    forEachPiece(param.dtype, [&](int64_t first, int piece) {
      const ExprId from = first == 0 ? base : kb_.add(base, kb_.index(first));
      kb_.vecLoad(array, first == 0 ? at : kb_.add(at, kb_.index(first)), tensor, from, piece);
    });
  };
  // A kept tensor is cached at one place per chunk: its row's own elements. An element of the row at another
  // column (RoPE's rotate-half of a normed head) is loaded again, where a second array would hold more than
  // the heuristics kept room for.
  const auto keeps = [&](ExprId key) {
    if (cache_.declarations == nullptr || cache_.tensors.count(tensor) == 0) return false;
    return cache_places_.try_emplace(tensor, key).first->second == key;
  };
  if (vector) {
    const bool cached = keeps(base);
    const auto key = std::make_pair(tensor, base);
    const ExprId slot = cached ? kb_.add(kb_.mul(cache_.chunk, kb_.index(width_)), lane_) : -1;
    bool fresh = false;
    const VarId cache = cached ? cacheArray(tensor, base, cache_.chunks * width_, &fresh) : -1;
    if (cached && !fresh) return kb_.localRead(cache, cacheSlot(slot));
    if (cached && !cache_.shared) {
      // Registers: the vector load fills the chunk's slots of the array directly.
      kb_.pushTarget(pre_);
      vectorLoads(cache, kb_.mul(cache_.chunk, kb_.index(width_)));
      kb_.popTarget();
      return kb_.localRead(cache, slot);
    }
    auto it = vector_loads_.find(key);
    if (it == vector_loads_.end()) {
      const VarId array = kb_.arrayVar("v", param.dtype, width_);
      kb_.pushTarget(pre_);
      kb_.declare(array);
      vectorLoads(array, kb_.index(0));
      kb_.popTarget();
      it = vector_loads_.emplace(key, array).first;
    }
    const ExprId value = kb_.localRead(it->second, lane_);
    if (cached) {  // shared: lanes are not adjacent there, so each lane is written on its own
      kb_.pushTarget(body_);
      kb_.localWrite(cache, cacheSlot(slot), value);
      kb_.popTarget();
    }
    return value;
  }
  const ExprId offset = coefficient == 0 ? base : kb_.add(base, kb_.mul(lane_, kb_.index(coefficient)));
  if (keeps(offset)) {
    // Per-lane or lane-invariant scalar loads are cached too: a slot per chunk (and lane).
    const bool per_lane = laneDependent(offset);
    const ExprId slot = per_lane ? kb_.add(kb_.mul(cache_.chunk, kb_.index(width_)), lane_) : cache_.chunk;
    bool fresh = false;
    const VarId cache = cacheArray(tensor, offset, cache_.chunks * (per_lane ? width_ : 1), &fresh);
    if (fresh) {
      kb_.pushTarget(per_lane ? body_ : pre_);
      kb_.localWrite(cache, cacheSlot(slot), kb_.load(tensor, offset));
      kb_.popTarget();
    }
    return kb_.localRead(cache, cacheSlot(slot));
  }
  return bind("x", kb_.load(tensor, offset));
}

ExprId ValueBuilder::sharedChunkValue(VarId shared, ExprId from) {
  if (width_ == 1) return kb_.localRead(shared, from);
  auto it = shared_loads_.find({shared, from});
  if (it == shared_loads_.end()) {
    const DataType dtype = kb_.kernel().vars[shared].dtype;
    const VarId array = kb_.arrayVar("sv", dtype, width_);
    kb_.pushTarget(pre_);
    kb_.declare(array);
    forEachPiece(dtype, [&](int64_t first, int piece) {
      kb_.sharedVecLoad(array, kb_.index(first), shared, first == 0 ? from : kb_.add(from, kb_.index(first)), piece);
    });
    kb_.popTarget();
    it = shared_loads_.emplace(std::make_pair(shared, from), array).first;
  }
  return kb_.localRead(it->second, lane_);
}

int64_t keptValueBytes(DataType dtype) {
  return dtype == DataType::BFloat16 || dtype == DataType::Half ? sizeOf(dtype) : sizeOf(computeTypeOf(dtype));
}

VarId ValueBuilder::cacheArray(TensorId tensor, ExprId key, int64_t slots, bool* fresh) {
  auto [it, inserted] = cached_.try_emplace(std::make_pair(tensor, key), -1);
  *fresh = inserted;
  if (inserted) {
    const DataType dtype = kb_.kernel().tensors[tensor].dtype;
    const bool as_stored = keptValueBytes(dtype) < sizeOf(computeTypeOf(dtype));
    it->second = !cache_.shared ? kb_.arrayVar("cache", dtype, slots)
                 : as_stored    ? kb_.sharedStorageArray("cache", dtype, slots * cache_.threads)
                                : kb_.arrayVar("cache", dtype, slots * cache_.threads, VarKind::SharedArray);
    kb_.pushTarget(cache_.declarations);
    kb_.declare(it->second);
    kb_.popTarget();
  }
  return it->second;
}

ExprId ValueBuilder::cacheSlot(ExprId slot) {
  return cache_.shared ? kb_.add(kb_.mul(slot, kb_.index(cache_.threads)), cache_.thread) : slot;
}

const Val* launchArgumentSource(const Val* scalar) {
  const Val* source = scalar;
  while (!source->isFusionInput() && source->definition() != nullptr && source->definition()->kind() == OpKind::CastOp) {
    source = source->definition()->input(0);
  }
  return source->isFusionInput() && source->isScalar() ? source : nullptr;
}

ExprId ValueBuilder::scalar(const Val* val) {
  const ScalarValue& v = bound_.scalarOf(val);
  // A scalar input is a launch argument: a new value (a scale, an offset) reuses the compiled kernel.
  // Constants of the definition stay literals.
  // A scalar input cast (by the definition, then to the type an op computes in) is its argument cast by
  // the kernel: launchArgumentInputs counts such an input as read only as a value.
  ExprId value;
  if (const Val* source = launchArgumentSource(val)) {
    value = kb_.scalarArgument(source, source->dtype(), bound_.scalarOf(source));
    std::vector<DataType> casts;
    for (const Val* c = val; c != source; c = c->definition()->input(0)) casts.push_back(c->dtype());
    for (auto it = casts.rbegin(); it != casts.rend(); ++it) value = kb_.cast(value, *it);
  } else if (isFloating(val->dtype())) {
    value = kb_.constant(toDouble(v), val->dtype());
  } else {
    value = kb_.constantInt(toInt(v), val->dtype());
  }
  markInvariant(value);
  return value;
}

ExprId ValueBuilder::cpuScalar(const TensorView* input) {
  // Passed in its dtype's compute type (what a launch word holds), then narrowed back: exact, since the
  // value came from memory of the input's dtype.
  const DataType passed = computeTypeOf(input->dtype());
  ExprId value = kb_.scalarArgument(input, passed, passed == DataType::Bool ? ScalarValue{false} : ScalarValue{int64_t{0}});
  if (passed != input->dtype()) value = kb_.cast(value, input->dtype());
  markInvariant(value);
  return value;
}

ExprId ValueBuilder::valueAt(const Val* val, const std::vector<Idx>& index) {
  if (val->isScalar()) return scalar(val);
  if (auto it = results_.find(val); it != results_.end()) return it->second;
  if (const TensorView* cpu = cpuScalarInputOf(val)) return cpuScalar(cpu);
  std::vector<int64_t> key;
  for (const Idx& i : index) {
    key.push_back(i.base);
    key.push_back(i.lane);
  }
  auto memo_key = std::make_pair(val, std::move(key));
  if (auto it = memo_.find(memo_key); it != memo_.end()) return it->second;
  ExprId result;
  if (auto p = params_.find(val); p != params_.end()) {
    result = loadAt(p->second, index);
  } else if (auto kept = computed_cache_.find(memo_key); kept != computed_cache_.end()) {
    result = kb_.localRead(kept->second.array, computedSlot(kept->second.per_lane));
  } else {
    auto d = defined_.find(val);
    BRAZE_ASSERT(d != defined_.end(), "kernel lowering: {} is neither computed in the segment nor one of its inputs",
                 val->name());
    result = compute(*d->second, val, index);
    if (worthKeeping(val) && !isInvariant(result)) {
      // The pass that first computes it stores it in the thread's slot; later passes read the slot.
      // Unrolled, the array is registers, and an input slot read by no later pass dies here, so softmax
      // keeps exp(x - max) in the registers x had.
      ComputedSlot slot{kb_.arrayVar("kept", val->dtype(), cache_.chunks * width_), laneDependent(result)};
      kb_.pushTarget(cache_.declarations);
      kb_.declare(slot.array);
      kb_.popTarget();
      kb_.pushTarget(slot.per_lane ? body_ : pre_);
      kb_.localWrite(slot.array, computedSlot(slot.per_lane), result);
      kb_.popTarget();
      computed_cache_.emplace(memo_key, slot);
    }
  }
  memo_.emplace(std::move(memo_key), result);
  return result;
}

bool ValueBuilder::worthKeeping(const Val* val) const {
  if (cache_.declarations == nullptr || cache_.shared || last_pass_ || !isFloating(val->dtype())) return false;
  auto d = defined_.find(val);
  if (d == defined_.end()) return false;
  switch (d->second->kind()) {
    case OpKind::Acos: case OpKind::Acosh: case OpKind::Asin: case OpKind::Asinh: case OpKind::Atan:
    case OpKind::Atanh: case OpKind::Cos: case OpKind::Cosh: case OpKind::Erf: case OpKind::Erfc:
    case OpKind::Erfcinv: case OpKind::Erfinv: case OpKind::Exp: case OpKind::Exp2: case OpKind::Expm1:
    case OpKind::Lgamma: case OpKind::Log: case OpKind::Log10: case OpKind::Log1p: case OpKind::Log2:
    case OpKind::Reciprocal: case OpKind::Rsqrt: case OpKind::Sigmoid: case OpKind::Silu: case OpKind::Sin:
    case OpKind::Sinh: case OpKind::Sqrt: case OpKind::Tan: case OpKind::Tanh: case OpKind::Atan2:
    case OpKind::Div: case OpKind::TrueDiv: case OpKind::Fmod: case OpKind::Pow: case OpKind::Remainder:
      return true;
    default: return false;
  }
}

ExprId ValueBuilder::computedSlot(bool per_lane) {
  return per_lane ? kb_.add(kb_.mul(cache_.chunk, kb_.index(width_)), lane_) : cache_.chunk;
}

std::vector<Idx> ValueBuilder::mapOperand(const Val* operand, const Val* out, const std::vector<Idx>& index) {
  const auto& in_sizes = bound_.sizesOf(operand);
  const auto& out_sizes = bound_.sizesOf(out);
  if (in_sizes.empty()) return {};
  std::vector<Idx> mapped = index;
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    if (in_sizes[d] == 1 && out_sizes[d] != 1) mapped[d] = Idx{kb_.index(0), false};
  }
  return mapped;
}

ExprId ValueBuilder::compute(const Expr& expr, const Val* out, const std::vector<Idx>& index) {
  const OpCategory category = opInfo(expr.kind()).category;
  switch (category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: {
      std::vector<ExprId> args;
      for (const Val* in : expr.inputs()) args.push_back(valueAt(in, in->isTensor() ? mapOperand(in, out, index) : index));
      return elementwiseOp(expr, out, std::move(args));
    }
    case OpCategory::Meta: return valueAt(expr.input(0), mapMeta(expr, index));
    case OpCategory::Data:
      if (expr.kind() == OpKind::StrideOrder) return valueAt(expr.input(0), index);  // a copy; only the layout differs
      return expr.kind() == OpKind::Pad ? pad(expr, index) : cat(expr, index);
    case OpCategory::Creation: return creation(expr, index);
    case OpCategory::Random: return random(expr, index);
    case OpCategory::Indexing: return indexing(expr, index);
    case OpCategory::Quantize: return quantize(expr, index);
    case OpCategory::Reduction:
      if (reducedPerElement(expr, bound_)) return reductionPerElement(expr, out, index);
      [[fallthrough]];
    default:
      BRAZE_UNREACHABLE("kernel lowering: {} cannot be computed per element (it needs a reduction or matmul kernel)",
                        expr.name());
  }
}

ExprId ValueBuilder::elementwiseOp(const Expr& expr, const Val* out, std::vector<ExprId> args) {
  const bool all_invariant =
      std::all_of(args.begin(), args.end(), [&](ExprId a) { return isInvariant(a); });
  ExprId value;
  if (opInfo(expr.kind()).category == OpCategory::Cast) {
    value = kb_.cast(args[0], out->dtype());
    // cast(neg(x), bf16) for a bf16 x (neg computes in float): the negation of x in x's own type, which
    // the emitter knows needs no rounding (RoPE's rotate-half).
    const DataType to = out->dtype();
    ExprId v = args[0];
    if (kb_.expr(v).kind == EKind::VarRef) v = kb_.boundValue(kb_.expr(v).ref).value_or(v);
    const KExpr& e = kb_.expr(v);
    if ((to == DataType::BFloat16 || to == DataType::Half) && e.kind == EKind::Elementwise &&
        (e.op == OpKind::Neg || e.op == OpKind::Abs) && kb_.expr(e.args[0]).dtype == to) {
      value = kb_.elementwise(e.op, to, {e.args[0]});
    }
  } else if ((expr.kind() == OpKind::TrueDiv || expr.kind() == OpKind::Div) && out->dtype() == DataType::Float &&
             !all_invariant && isInvariant(args[1])) {
    value = divideByInvariant(args[0], args[1]);
  } else {
    value = kb_.elementwise(expr.kind(), out->dtype(), std::move(args));
  }
  const ExprId bound = bind("t", value);
  if (all_invariant) markInvariant(bound);
  return bound;
}

// As PyTorch does for a tensor divided by a scalar: one reciprocal, then a product per element (at most
// 1.5 ulp from the correctly rounded quotient, where a float division costs a dozen instructions and
// softmax's x / sum(x) was bound by them). A subnormal s, whose reciprocal would overflow, is scaled
// by 2^64 first and the product by 2^64 after (exact: powers of two), so x / s stays finite where it is;
// an s above 2^126, whose reciprocal would be subnormal (and lose the bits the bound needs), by 2^-64.
ExprId ValueBuilder::divideByInvariant(ExprId x, ExprId s) {
  const DataType f = DataType::Float;
  const ExprId magnitude = kb_.elementwise(OpKind::Abs, f, {s});
  const ExprId tiny = kb_.elementwise(OpKind::Lt, DataType::Bool, {magnitude, kb_.constant(0x1p-126, f)});
  const ExprId huge = kb_.elementwise(OpKind::Gt, DataType::Bool, {magnitude, kb_.constant(0x1p126, f)});
  const ExprId scale = bind(
      "scale", kb_.elementwise(OpKind::Where, f,
                               {tiny, kb_.constant(0x1p64, f),
                                kb_.elementwise(OpKind::Where, f, {huge, kb_.constant(0x1p-64, f), kb_.constant(1, f)})}));
  const ExprId inverse =
      bind("inv", kb_.elementwise(OpKind::TrueDiv, f, {kb_.constant(1, f), kb_.elementwise(OpKind::Mul, f, {s, scale})}));
  return kb_.elementwise(OpKind::Mul, f, {kb_.elementwise(OpKind::Mul, f, {x, inverse}), scale});
}

std::vector<Idx> ValueBuilder::mapMeta(const Expr& expr, const std::vector<Idx>& index) {
  const Val* in = expr.input(0);
  const auto& in_sizes = bound_.sizesOf(in);
  const auto& out_sizes = bound_.sizesOf(expr.output(0));
  const Idx zero{kb_.index(0), false};
  std::vector<Idx> mapped;
  switch (expr.kind()) {
    case OpKind::Set:
    case OpKind::SegmentSet: return index;
    case OpKind::Broadcast: {
      const auto& flags = expr.attrs().getInts("is_broadcast_dim");
      for (size_t d = 0; d < flags.size(); ++d) {
        if (!flags[d]) mapped.push_back(index[d]);
      }
      break;
    }
    case OpKind::BroadcastInDim: {
      const auto& bdims = expr.attrs().getInts("broadcast_dims");
      for (size_t i = 0; i < bdims.size(); ++i) {
        mapped.push_back(in_sizes[i] == 1 ? zero : index[bdims[i]]);
      }
      break;
    }
    case OpKind::Expand:
      for (size_t d = 0; d < in_sizes.size(); ++d) mapped.push_back(in_sizes[d] != out_sizes[d] ? zero : index[d]);
      break;
    case OpKind::Permute: {
      const auto& dims = expr.attrs().getInts("dims");
      mapped.assign(in_sizes.size(), zero);
      for (size_t i = 0; i < dims.size(); ++i) mapped[dims[i]] = index[i];
      break;
    }
    case OpKind::Squeeze: {
      const auto& dims = expr.attrs().getInts("dims");
      size_t next = 0;
      for (int64_t d = 0; d < static_cast<int64_t>(in_sizes.size()); ++d) {
        const bool removed = std::find(dims.begin(), dims.end(), d) != dims.end();
        mapped.push_back(removed ? zero : index[next++]);
      }
      break;
    }
    case OpKind::Slice: {
      const auto dims = sliceDims(expr, in_sizes, bound_.intOperands(expr));
      for (size_t d = 0; d < dims.size(); ++d) {
        const Idx& i = index[d];
        if (dims[d].step == 1) {
          mapped.push_back({kb_.add(i.base, kb_.index(dims[d].start)), i.lane});
        } else {
          mapped.push_back({kb_.add(kb_.mul(materialize(i), kb_.index(dims[d].step)), kb_.index(dims[d].start)), false});
        }
      }
      break;
    }
    case OpKind::Reshape: return mapReshape(expr, index);
    default: BRAZE_UNREACHABLE("kernel lowering: meta op {}", expr.name());
  }
  return mapped;
}

namespace {

// A reshape as runs of dims: input dims [in_begin, in_end) hold the elements of output dims [out_begin,
// out_end) (equal products), each run as small as can be. Row-major order makes each run's input index the
// unflattening of its output dims' linear index alone: a split of one input dim ([T, 10240] -> [T, 8, 10,
// 128]) needs no division at all. Empty where a size is 0.
struct ReshapeRun {
  size_t in_begin, in_end, out_begin, out_end;
};
std::vector<ReshapeRun> reshapeRuns(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (std::find(in.begin(), in.end(), 0) != in.end() || std::find(out.begin(), out.end(), 0) != out.end()) return {};
  std::vector<ReshapeRun> runs;
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    ReshapeRun run{i, i, o, o};
    int64_t in_product = 1, out_product = 1;
    if (i < in.size()) in_product *= in[i++];
    if (o < out.size()) out_product *= out[o++];
    while (in_product != out_product) {
      if (in_product < out_product && i < in.size()) {
        in_product *= in[i++];
      } else if (out_product < in_product && o < out.size()) {
        out_product *= out[o++];
      } else {
        return {};  // not a reshape of equal element counts: left to the whole-index mapping
      }
    }
    run.in_end = i;
    run.out_end = o;
    runs.push_back(run);
  }
  return runs;
}

}  // namespace

std::vector<Idx> ValueBuilder::mapReshape(const Expr& expr, const std::vector<Idx>& index) {
  const auto& in_sizes = bound_.sizesOf(expr.input(0));
  const auto& out_sizes = bound_.sizesOf(expr.output(0));
  std::vector<ReshapeRun> runs = reshapeRuns(in_sizes, out_sizes);
  if (runs.empty()) runs.push_back({0, in_sizes.size(), 0, out_sizes.size()});
  std::vector<Idx> mapped;
  for (const ReshapeRun& run : runs) {
    const std::vector<int64_t> in_run(in_sizes.begin() + static_cast<std::ptrdiff_t>(run.in_begin),
                                      in_sizes.begin() + static_cast<std::ptrdiff_t>(run.in_end));
    if (in_run.empty()) continue;  // output dims of size 1 that no input dim holds
    const std::vector<Idx> out_index(index.begin() + static_cast<std::ptrdiff_t>(run.out_begin),
                                     index.begin() + static_cast<std::ptrdiff_t>(run.out_end));
    if (in_run.size() == 1 && out_index.size() == 1) {
      mapped.push_back(out_index[0]);  // a dim the reshape keeps
      continue;
    }
    const std::vector<int64_t> out_run(out_sizes.begin() + static_cast<std::ptrdiff_t>(run.out_begin),
                                       out_sizes.begin() + static_cast<std::ptrdiff_t>(run.out_end));
    // The run's row-major linear index. Digits of one linear index (an index unflattened from it) merge
    // back into it, so a reshape of a reshape costs no division: [1, 64, T, 128] -> [1, 8, 8, T, 128].
    int64_t coefficient = 0;
    ExprId linear = flatOffset(StridedLayout::rowMajor(out_run), out_index, &coefficient);
    const bool lane = coefficient == 1;
    if (coefficient > 1) linear = kb_.add(linear, kb_.mul(lane_, kb_.index(coefficient)));
    // The lane survives when it cannot carry out of the operand's last dim.
    const bool keep_lane = lane && innerExtent(in_run) % width_ == 0 && kb_.divisibility(linear) % width_ == 0;
    if (lane && !keep_lane) linear = kb_.add(linear, lane_);
    for (const Idx& i : unflatten(linear, keep_lane, in_run)) mapped.push_back(i);
  }
  return mapped;
}

ExprId ValueBuilder::creation(const Expr& expr, const std::vector<Idx>& index) {
  const DataType dtype = expr.output(0)->dtype();
  if (expr.kind() == OpKind::Full) return kb_.cast(scalar(expr.input(0)), dtype);
  // iota: start + i * step, computed as the reference does (float64 for floats, wrapping int64).
  const DataType math = isFloating(dtype) ? DataType::Double : DataType::Int64;
  const ExprId i = kb_.indexToValue(materialize(index[0]), math);
  const ExprId start = kb_.cast(scalar(expr.input(1)), math);
  const ExprId step = kb_.cast(scalar(expr.input(2)), math);
  const ExprId value = kb_.elementwise(OpKind::Add, math, {start, kb_.elementwise(OpKind::Mul, math, {i, step})});
  return bind("iota", kb_.cast(value, dtype));
}

// uniform and normal as the reference computes them (eval_scan_scatter.cpp): Philox's number for the
// element's row-major position, scaled in double and rounded to the dtype; a uniform value that rounds
// up to maxval (as the dtype holds it) becomes minval, so the range stays [minval, maxval).
ExprId ValueBuilder::random(const Expr& expr, const std::vector<Idx>& index) {
  const DataType dtype = expr.output(0)->dtype();
  const DataType f64 = DataType::Double;
  int64_t coefficient = 0;
  ExprId linear = flatOffset(StridedLayout::rowMajor(bound_.sizesOf(expr.output(0))), index, &coefficient);
  if (coefficient != 0) linear = kb_.add(linear, kb_.mul(lane_, kb_.index(coefficient)));
  const ExprId i = kb_.indexToValue(linear, DataType::Int64);
  const ExprId a = kb_.cast(scalar(expr.input(0)), f64);
  const ExprId b = kb_.cast(scalar(expr.input(1)), f64);
  const ExprId seed = kb_.cast(scalar(expr.input(2)), DataType::Int64);
  const ExprId offset = kb_.cast(scalar(expr.input(3)), DataType::Int64);
  const ExprId unit = kb_.randomUnit(expr.kind(), seed, offset, i);
  if (expr.kind() == OpKind::Normal) {
    return bind("normal", kb_.cast(kb_.elementwise(OpKind::Add, f64, {a, kb_.elementwise(OpKind::Mul, f64, {b, unit})}), dtype));
  }
  const ExprId span = kb_.elementwise(OpKind::Sub, f64, {b, a});
  const ExprId value = bind("uniform", kb_.cast(kb_.elementwise(OpKind::Add, f64, {a, kb_.elementwise(OpKind::Mul, f64, {span, unit})}), dtype));
  // maxval as the dtype holds it (torch's uniform_ compares there too): 3.7 is 3.69921875 in Half.
  const ExprId max_in_dtype = kb_.cast(kb_.cast(b, dtype), f64);
  const ExprId at_max = kb_.elementwise(OpKind::Ge, DataType::Bool, {kb_.cast(value, f64), max_in_dtype});
  return bind("uniform", kb_.elementwise(OpKind::Where, dtype, {at_max, kb_.cast(a, dtype), value}));
}

ExprId ValueBuilder::indexing(const Expr& expr, const std::vector<Idx>& index) {
  const Val* x = expr.input(0);
  const Val* idx_tensor = expr.input(1);
  const int64_t dim = expr.attrs().getInt("dim");
  const auto& x_sizes = bound_.sizesOf(x);
  const auto& i_sizes = bound_.sizesOf(idx_tensor);
  std::vector<Idx> src = index;
  ExprId selected;
  if (expr.kind() == OpKind::IndexSelect) {
    selected = valueAt(idx_tensor, {index[dim]});
  } else {
    std::vector<Idx> at = index;
    for (size_t d = 0; d < x_sizes.size(); ++d) {
      if (i_sizes[d] == 1) at[d] = Idx{kb_.index(0), false};
      if (static_cast<int64_t>(d) != dim && x_sizes[d] == 1) src[d] = Idx{kb_.index(0), false};
    }
    selected = valueAt(idx_tensor, at);
  }
  // An index outside x's dim reads element 0 instead and is reported (kernel/index_errors.h).
  const std::string site = fmt::format("{} {} (dim {} of {}, size {})", expr.name(), expr.output(0)->name(), dim,
                                       x->name(), x_sizes[dim]);
  src[dim] = Idx{bind("i", kb_.checkedIndex(selected, kb_.index(x_sizes[dim]), site)), false};
  return valueAt(x, src);
}

ExprId ValueBuilder::quantize(const Expr& expr, const std::vector<Idx>& index) {
  const Val* x = expr.input(0);
  const Val* scale = expr.input(1);
  const std::string& granularity = expr.attrs().getString("granularity");
  std::vector<Idx> at;
  if (granularity == "tensor") {
    at.assign(bound_.sizesOf(scale).size(), Idx{kb_.index(0), false});
  } else if (granularity == "channel") {
    at = {index[expr.attrs().getInt("axis")]};
  } else {
    const auto& block = expr.attrs().getInts("block_shape");
    for (size_t d = 0; d < index.size(); ++d) at.push_back({kb_.div(materialize(index[d]), kb_.index(block[d])), false});
  }
  const DataType f64 = DataType::Double;
  const ExprId s = kb_.cast(valueAt(scale, at), f64);
  const ExprId zp = expr.inputs().size() > 2 ? kb_.cast(valueAt(expr.input(2), at), f64) : kb_.constant(0.0, f64);
  const ExprId xv = kb_.cast(valueAt(x, index), f64);
  const DataType out = expr.output(0)->dtype();
  ExprId value;
  if (expr.kind() == OpKind::Dequantize) {
    value = kb_.elementwise(OpKind::Mul, f64, {kb_.elementwise(OpKind::Sub, f64, {xv, zp}), s});
  } else {
    value = kb_.elementwise(OpKind::TrueDiv, f64, {xv, s});
    // Integers: round half to even, add the zero point, saturate (the cast saturates).
    if (!isFloat8(out)) value = kb_.elementwise(OpKind::Add, f64, {kb_.elementwise(OpKind::Round, f64, {value}), zp});
  }
  return bind("q", kb_.cast(value, out));
}

}  // namespace braze::scheduler
