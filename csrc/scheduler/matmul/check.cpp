// The matmul scheduler takes a segment of one matmul or linear with the ops that feed its operands
// (casts, dequantizes, broadcasts, views: computed as each operand value is loaded) and the elementwise
// ops applied to its result (bias, activation, scale, cast, quantize: applied to each accumulator before
// it is stored).
#include "scheduler/registry.h"

#include "ir/fusion.h"

#include <unordered_set>

namespace braze {
namespace {

// Ops computed per element of their index space: quantize (per tensor, channel or block) is one.
bool elementwise(OpCategory c) {
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary || c == OpCategory::Cast ||
         c == OpCategory::Quantize;
}

}  // namespace

Verdict canScheduleMatmul(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  const Expr* mm = nullptr;
  for (const Expr* e : candidate.exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    // Values are computed per element as the operands are loaded: a scan or a scatter cannot be.
    if (category == OpCategory::Scan || category == OpCategory::Scatter) {
      return Verdict::no(exprLabel(*e) + " is not computed per element (it is in a segment of its own)");
    }
    if (category != OpCategory::Matmul) continue;
    if (mm != nullptr) return Verdict::no("the group has two matmuls (" + exprLabel(*mm) + ", " + exprLabel(*e) + ")");
    mm = e;
  }
  if (mm == nullptr) return Verdict::no("the group has no matmul");
  if (!facts.reductions.empty()) return Verdict::no("a reduction with the matmul: " + exprLabel(*facts.reductions[0]));
  const Val* a = mm->input(0);
  const Val* b = mm->input(1);
  const Val* out = mm->output(0);
  const auto* ta = static_cast<const TensorView*>(a);
  const auto* tb = static_cast<const TensorView*>(b);
  if (ta->rank() < 2 || tb->rank() < 2) return Verdict::no(exprLabel(*mm) + ": a 1-D operand (a matrix-vector product)");
  if (a->dtype() != b->dtype()) {
    return Verdict::no(fmt::format("{}: operands of dtypes {} and {}; mma.sync takes two of one dtype",
                                   exprLabel(*mm), toString(a->dtype()), toString(b->dtype())));
  }
  const DataType operand = a->dtype();
  const bool integer = operand == DataType::Int8 || operand == DataType::UInt8;
  // fp8 (e4m3fn, e5m2) needs sm_89, which the pipeline checks against the device; the fnuz formats have
  // no mma.sync at all.
  const bool fp8 = operand == DataType::Float8_e4m3fn || operand == DataType::Float8_e5m2;
  if (!integer && !fp8 && operand != DataType::BFloat16 && operand != DataType::Half) {
    return Verdict::no(fmt::format("{}: {} operands; mma.sync takes bf16, f16, (u)int8, e4m3fn or e5m2", exprLabel(*mm),
                                   toString(operand)));
  }
  // The result is the accumulator converted once: an integer accumulator wraps to a result of 32 bits or
  // fewer as the reference's exact sum does; an f32 accumulator rounds to a float of 32 bits or fewer.
  const DataType r = out->dtype();
  if (integer && r != DataType::Int32 && r != DataType::Int16 && r != DataType::Int8 && r != DataType::UInt8) {
    return Verdict::no(fmt::format("{}: a {} result of (u)int8 operands; the int32 accumulator gives Int32, Int16, "
                                   "Int8 or UInt8",
                                   exprLabel(*mm), toString(r)));
  }
  if (!integer && r != DataType::Float && r != DataType::BFloat16 && r != DataType::Half) {
    return Verdict::no(fmt::format("{}: a {} result of {} operands; the f32 accumulator gives Float, BFloat16 or Half",
                                   exprLabel(*mm), toString(r), toString(operand)));
  }
  // Everything computed from the result is elementwise on its index space (the epilogue).
  std::unordered_set<const Val*> after{out};
  for (const Expr* e : candidate.exprs) {
    if (e == mm) continue;
    bool reads_result = false;
    for (const Val* in : e->inputs()) reads_result = reads_result || after.count(in) != 0;
    if (!reads_result) continue;
    if (!elementwise(opInfo(e->kind()).category)) {
      return Verdict::no("after the matmul, " + exprLabel(*e) + " is not elementwise");
    }
    for (const Val* o : e->outputs()) after.insert(o);
  }
  const auto& sizes = bound.sizesOf(out);
  for (const Val* o : candidate.outputs) {
    if (after.count(o) == 0) return Verdict::no("output " + o->name() + " is not computed from the matmul's result");
    if (bound.sizesOf(o) != sizes) return Verdict::no("output " + o->name() + " has another shape than the matmul's");
  }
  return Verdict::yes();
}

}  // namespace braze
