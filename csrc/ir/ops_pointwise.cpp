// Elementwise builders: unary, binary, ternary ops and cast, with PyTorch's type promotion.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

#include <algorithm>

namespace braze {
namespace {

using detail::broadcastDims;
using detail::fusionOf;

// torch's (and nvFuser's) tiers: tensors with dims, then 0-d tensors, then scalars. A lower tier changes the
// type only where its category is higher: an Int32 tensor beside a Double 0-d tensor is Double, a Float
// tensor beside one stays Float, an Int32 tensor beside an Int64 0-d tensor stays Int32.
std::optional<DataType> combineTiers(std::optional<DataType> higher, std::optional<DataType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (isFloating(*higher)) return higher;
  if (isBool(*higher) || isFloating(*lower)) return promoteTypes(*higher, *lower);
  return higher;
}

}  // namespace

DataType promotedType(const std::vector<Val*>& operands) {
  std::optional<DataType> dims, zero_dim, scalars;
  for (Val* v : operands) {
    auto& slot = !v->isTensor() ? scalars : v->asTensor()->rank() == 0 ? zero_dim : dims;
    slot = slot ? promoteTypes(*slot, v->dtype()) : v->dtype();
  }
  if (!dims && !zero_dim) return *scalars;
  // A scalar stands for its category's default type (a double scalar with a float tensor keeps the
  // tensor's width; so does an int scalar).
  if (scalars) scalars = defaultTypeOf(categoryOf(*scalars));
  return *combineTiers(dims, combineTiers(zero_dim, scalars));
}

namespace {

// nvFuser computes Half, BFloat16 and fp8 arithmetic in Float and returns Float; scripts written for
// it cast back themselves (the seed layer_norm does), so braze returns the same types.
DataType computeType(DataType dtype) {
  return (dtype == DataType::Half || dtype == DataType::BFloat16 || isFloat8(dtype)) ? DataType::Float : dtype;
}

DataType resultType(OpKind kind, DataType promoted, const std::vector<Val*>& operands) {
  // nextafter steps to the neighbour in its operands' type, as torch's does: a Half or BFloat16 result,
  // whose step a Float would not hold.
  if (kind == OpKind::NextAfter && (promoted == DataType::Half || promoted == DataType::BFloat16)) return promoted;
  switch (opInfo(kind).result) {
    case ResultType::SameAsInput: return promoted;
    case ResultType::Promoted: return computeType(promoted);
    case ResultType::FloatOfPromoted: return isFloating(promoted) ? computeType(promoted) : DataType::Float;
    case ResultType::Bool: return DataType::Bool;
    case ResultType::IntegerOnly: {
      for (Val* v : operands) {
        BRAZE_TYPE_CHECK(isIntegral(v->dtype()) || isBool(v->dtype()),
                         "{}: expected integer or bool operands, but {} has dtype {}", opName(kind), v->name(),
                         toString(v->dtype()));
      }
      return promoted;
    }
    case ResultType::NotApplicable: break;
  }
  BRAZE_UNREACHABLE("{} is not elementwise", opName(kind));
}

// nvFuser's rule for tensor operands of different ranks: the lower-rank ones get leading broadcast dims
// (numpy's right alignment), recorded as broadcast ops so the printed script shows them.
void broadcastToCommonRank(std::vector<Val*>& operands) {
  int64_t rank = 0;
  for (Val* v : operands) {
    if (v->isTensor()) rank = std::max(rank, v->asTensor()->rank());
  }
  for (Val*& v : operands) {
    if (!v->isTensor() || v->asTensor()->rank() == rank) continue;
    std::vector<bool> is_broadcast_dim(static_cast<size_t>(rank), false);
    std::fill_n(is_broadcast_dim.begin(), rank - v->asTensor()->rank(), true);
    v = broadcast(v->asTensor(), is_broadcast_dim);
  }
}

// A tensor op computes in its tensors' type, as nvFuser and torch do: a scalar operand of another type is
// converted to that type first, so x == 0.1 on a Float x compares with float32(0.1), and x + 16777217
// adds float32(16777217). Constants are converted here (they stay constants); other scalars get a cast.
Val* inComputeType(Val* v, DataType dtype) {
  if (v->dtype() == dtype) return v;
  // A 0-d tensor is converted too (torch reads it as a scalar of the op's type); tensors with dims are read in
// their own type by kernels, which convert each element.
  if (v->isTensor()) return v->asTensor()->rank() == 0 ? cast(v, dtype) : v;
  Scalar* s = v->asScalar();
  if (!s->isConstant()) return cast(v, dtype);
  Scalar* converted = s->fusion()->constant(*s->value(), dtype);
  converted->setWrittenAs(s->writtenAs().value_or(WrittenConstant{*s->value(), s->dtype()}));
  return converted;
}

// Scalar-only arithmetic (a size computed from sizes) keeps its own promotion.
void scalarsInComputeType(std::vector<Val*>& operands, DataType dtype) {
  if (std::none_of(operands.begin(), operands.end(), [](Val* v) { return v->isTensor(); })) return;
  for (Val*& v : operands) v = inComputeType(v, dtype);
}

// The type a binary op computes in: its result's, or for comparisons and logical ops the promoted type's.
DataType binaryComputeType(OpKind kind, DataType promoted) {
  switch (opInfo(kind).result) {
    case ResultType::IntegerOnly: return promoted;
    case ResultType::FloatOfPromoted: return isFloating(promoted) ? computeType(promoted) : DataType::Float;
    default: return computeType(promoted);
  }
}

Val* elementwise(OpKind kind, std::vector<Val*> operands, DataType dtype) {
  Fusion* fusion = fusionOf(operands);
  broadcastToCommonRank(operands);
  for (Val* v : operands) {
    BRAZE_TYPE_CHECK(v->dtype() != DataType::Null, "{}: operand {} has no dtype", opName(kind), v->name());
  }
  Val* out = nullptr;
  const bool any_tensor = std::any_of(operands.begin(), operands.end(), [](Val* v) { return v->isTensor(); });
  if (any_tensor) {
    out = detail::newTensorLike(fusion, dtype, broadcastDims(opName(kind), operands));
  } else {
    out = fusion->newScalar(dtype);
  }
  fusion->newExpr(kind, std::move(operands), {out});
  return out;
}

}  // namespace

Val* unaryOp(OpKind kind, Val* x) {
  BRAZE_ASSERT(opInfo(kind).category == OpCategory::Unary, "{} is not a unary op", opName(kind));
  BRAZE_CHECK(x != nullptr, "{}: operand is None", opName(kind));
  if (kind == OpKind::LogicalNot || kind == OpKind::BitwiseNot) {
    BRAZE_TYPE_CHECK(kind == OpKind::LogicalNot || isIntegral(x->dtype()) || isBool(x->dtype()),
                     "bitwise_not: expected an integer or bool operand, but {} has dtype {}", x->name(),
                     toString(x->dtype()));
  }
  // silu keeps its operand's type, which must then hold fractions (torch refuses integers too).
  BRAZE_TYPE_CHECK(kind != OpKind::Silu || isFloating(x->dtype()),
                   "silu: expected a floating operand, but {} has dtype {}; cast it to Float first", x->name(),
                   toString(x->dtype()));
  return elementwise(kind, {x}, resultType(kind, x->dtype(), {x}));
}

Val* binaryOp(OpKind kind, Val* a, Val* b) {
  BRAZE_ASSERT(opInfo(kind).category == OpCategory::Binary, "{} is not a binary op", opName(kind));
  BRAZE_CHECK(a != nullptr && b != nullptr, "{}: an operand is None", opName(kind));
  const DataType promoted = promotedType({a, b});
  const DataType dtype = resultType(kind, promoted, {a, b});
  if (kind == OpKind::Pow && !isFloating(dtype) && b->isScalar() && b->asScalar()->isConstant()) {
    // torch's rule for a constant exponent (a UInt8 base would otherwise take -1 as 255).
    BRAZE_CHECK(toDouble(*b->asScalar()->value()) >= 0,
                "pow: {} has dtype {}, and integers to negative integer powers are not allowed (got {}); cast it "
                "to Float first",
                a->name(), toString(a->dtype()), toString(*b->asScalar()->value()));
  }
  std::vector<Val*> operands{a, b};
  scalarsInComputeType(operands, binaryComputeType(kind, promoted));
  return elementwise(kind, std::move(operands), dtype);
}

Val* ternaryOp(OpKind kind, Val* a, Val* b, Val* c) {
  BRAZE_ASSERT(opInfo(kind).category == OpCategory::Ternary && kind != OpKind::Addcmul, "{} is not a 3-operand op",
               opName(kind));
  BRAZE_CHECK(a != nullptr && b != nullptr && c != nullptr, "{}: an operand is None", opName(kind));
  DataType dtype = DataType::Null;
  switch (kind) {
    case OpKind::Where:
      BRAZE_TYPE_CHECK(isBool(a->dtype()),
                       "where: the condition {} must be Bool, got {} [nvFuser: Condition should be of DataType Bool]",
                       a->name(), toString(a->dtype()));
      dtype = promotedType({b, c});
      break;
    case OpKind::Lerp:
      dtype = promotedType({a, b, c});
      BRAZE_TYPE_CHECK(isFloating(dtype), "lerp: expected floating operands, got {}", toString(dtype));
      dtype = computeType(dtype);
      break;
    case OpKind::Clamp:
    case OpKind::Threshold:
      // The bounds adapt to x's type (a Python float bound on a bf16 tensor keeps bf16).
      dtype = a->isTensor() ? a->dtype() : promotedType({a, b, c});
      break;
    default: BRAZE_UNREACHABLE("ternaryOp({})", opName(kind));
  }
  std::vector<Val*> operands{a, b, c};
  // where's scalar branches become its result type when written; the condition stays Bool. clamp and
  // threshold compare in x's compute type (Float for a BFloat16 x, as its other comparisons do).
  if (kind != OpKind::Where) scalarsInComputeType(operands, computeType(dtype));
  return elementwise(kind, std::move(operands), dtype);
}

Val* addcmul(Val* x, Val* t1, Val* t2, Val* value) {
  BRAZE_CHECK(x && t1 && t2 && value, "addcmul: an operand is None");
  BRAZE_CHECK(value->isScalar(), "addcmul: value must be a scalar, got tensor {}", value->name());
  const DataType dtype = computeType(promotedType({x, t1, t2, value}));
  std::vector<Val*> operands{x, t1, t2, value};
  scalarsInComputeType(operands, dtype);
  return elementwise(OpKind::Addcmul, std::move(operands), dtype);
}

Val* cast(Val* x, DataType dtype) {
  BRAZE_CHECK(x != nullptr, "cast: operand is None");
  BRAZE_TYPE_CHECK(dtype != DataType::Null, "cast: a target dtype is required for {}", x->name());
  Fusion* fusion = fusionOf({x});
  Val* out = x->isTensor() ? static_cast<Val*>(detail::newTensorLike(fusion, dtype, x->asTensor()->logical()))
                           : fusion->newScalar(dtype);
  fusion->newExpr(OpKind::CastOp, {x}, {out}, {{"dtype", dtype}});
  return out;
}

}  // namespace braze
