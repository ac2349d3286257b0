// The matmul scheduler takes a segment of one matmul or linear with the ops that feed its operands
// (casts, dequantizes, broadcasts, views: computed as each operand value is loaded), the elementwise ops
// applied to its result (bias, activation, scale, cast, quantize: applied to each accumulator before it is
// stored), the index maps of its outputs (permute, reshape, slice: where each value is stored), and
// outputs of the result's shape computed without it (a dropout's mask: computed at the result's index).
#include "scheduler/matmul/entry.h"

#include "ir/fusion.h"
#include "scheduler/matmul/output_maps.h"

namespace braze {

Verdict canScheduleMatmul(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  const Expr* mm = nullptr;
  for (const Expr* e : candidate.exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    // Values are computed per element as the operands are loaded: a scan or a scatter cannot be.
    if (category == OpCategory::Scan || category == OpCategory::Scatter) {
      return Verdict::no(exprLabel(*e) + " is not computed per element (the scan scheduler's)");
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
  // Everything computed from the result is elementwise on its index space, or an index map of it that
  // puts each element in one place (the epilogue).
  const ResultChains after = resultChains(candidate.exprs, *mm, bound);
  if (!after.refusal.empty()) return Verdict::no(after.refusal);
  for (const Val* o : candidate.outputs) {
    auto chain = after.chains.find(o);
    if (chain == after.chains.end()) return Verdict::no("output " + o->name() + " is neither computed from the matmul's result nor of its shape");
    // A value another kernel reads is left to that kernel, which computes it from the result as it loads
    // it (seed 000's quantized q and k in the second GEMM's prologue: the plan measured on an H200).
    if (!chain->second.empty() && !o->isFusionOutput()) {
      return Verdict::no(fmt::format("{} is reached from the result through {} and read by another kernel, which computes "
                                     "it as it loads it",
                                     o->name(), exprLabel(*chain->second.front())));
    }
  }
  return Verdict::yes();
}

}  // namespace braze
