#include "codegen/var_uses.h"

namespace braze::codegen {

using namespace kernel;  // the emitter prints kernel IR
namespace {

bool isNarrowFloat(DataType d) {
  return d == DataType::BFloat16 || d == DataType::Half || d == DataType::Float8_e4m3fn || d == DataType::Float8_e5m2;
}

bool isMmaOperand(DataType d) {
  return d == DataType::BFloat16 || d == DataType::Half || d == DataType::Int8 || d == DataType::UInt8 ||
         d == DataType::Float8_e4m3fn || d == DataType::Float8_e5m2;
}

}  // namespace

VarUses::VarUses(const Kernel& kernel) : k_(kernel) {
  const size_t n = k_.vars.size();
  reached_ = kernel::reachedExpressions(k_);
  writes_.assign(n, 0);
  definition_.assign(n, -1);
  float_copy_.assign(n, false);
  only_as_float_.assign(n, false);
  stored_only_.assign(n, false);
  packed_.assign(n, false);
  byte_words_.assign(n, false);
  wgmma_accumulator_.assign(n, false);
  for (size_t v = 0; v < n; ++v) {
    const KVar& var = k_.vars[v];
    float_copy_[v] = var.kind == VarKind::LocalArray && (var.dtype == DataType::Int8 || var.dtype == DataType::UInt8);
    only_as_float_[v] = float_copy_[v];
    stored_only_[v] = var.kind == VarKind::Scalar && isNarrowFloat(var.dtype);
    packed_[v] = var.kind == VarKind::LocalArray && isMmaOperand(var.dtype) && var.size % valuesPerRegister(var.dtype) == 0;
    byte_words_[v] = var.kind == VarKind::LocalArray && (var.dtype == DataType::Int8 || var.dtype == DataType::UInt8) &&
                     var.size % 4 == 0;
  }
  // Reads by expressions: an array element read by anything but a conversion to float, and any read of
  // a scalar as an operand.
  std::vector<bool> read_as_float(n, false);
  for (size_t id = 0; id < k_.exprs.size(); ++id) {
    if (!reached_[id]) continue;  // not in the source
    const KExpr& x = k_.exprs[id];
    const bool to_float = x.kind == EKind::Cast && x.dtype == DataType::Float;
    for (ExprId a : x.args) {
      const KExpr& arg = k_.exprs[a];
      if (arg.kind == EKind::LocalRead && to_float) read_as_float[arg.ref] = true;
      if (arg.kind == EKind::LocalRead && !to_float) only_as_float_[arg.ref] = false;
      if (arg.kind == EKind::LocalRead) packed_[arg.ref] = byte_words_[arg.ref] = false;
      if (arg.kind == EKind::VarRef) stored_only_[arg.ref] = false;
    }
  }
  walk(k_.body);
  for (size_t v = 0; v < n; ++v) {
    float_copy_[v] = float_copy_[v] && read_as_float[v];
    only_as_float_[v] = only_as_float_[v] && float_copy_[v];
    stored_only_[v] = stored_only_[v] && singleLet(static_cast<VarId>(v));
  }
  // A B fragment an mma reads from inside a register is held as values.
  for (const Stmt* mma : mmas_) {
    const VarId b = mma->mma_operands[1];
    if (mma->b_offset % valuesPerRegister(k_.vars[b].dtype) != 0) packed_[b] = false;
  }
  for (size_t v = 0; v < n; ++v) {
    if (packed_[v]) byte_words_[v] = float_copy_[v] = only_as_float_[v] = false;
  }
}

bool VarUses::wholeRegisters(const Stmt& load) const {
  const KVar& to = k_.vars[load.var];
  if (!isMmaOperand(to.dtype)) return false;  // the packed dtypes: 1 or 2 bytes
  const KExpr& at = k_.exprs[load.b];
  const int64_t per = valuesPerRegister(to.dtype);
  return k_.tensors[load.tensor].dtype == to.dtype && load.width % per == 0 && at.kind == EKind::ConstInt && at.i % per == 0;
}

void VarUses::walk(const std::vector<Stmt>& stmts) {
  for (const Stmt& st : stmts) {
    if (st.var >= 0) {
      ++writes_[st.var];
      if (st.kind == SKind::Let) definition_[st.var] = st.a;
      if (st.kind != SKind::VecLoad && st.kind != SKind::Declare) float_copy_[st.var] = false;
      if (st.kind != SKind::Ldmatrix && st.kind != SKind::Declare && !(st.kind == SKind::VecLoad && wholeRegisters(st))) {
        packed_[st.var] = false;
      }
      if (st.kind != SKind::VecLoad && st.kind != SKind::Declare) byte_words_[st.var] = false;
      if (st.kind == SKind::VecLoad &&
          (st.width % 4 != 0 || k_.exprs[st.b].kind != EKind::ConstInt || k_.exprs[st.b].i % 4 != 0)) {
        byte_words_[st.var] = false;
      }
    }
    if (st.kind == SKind::Ldmatrix) {
      // Whole registers from the shared array's own type, at a constant offset.
      const KVar& to = k_.vars[st.var];
      const KExpr& at = k_.exprs[st.b];
      if (k_.vars[st.mma_operands[0]].dtype != to.dtype || at.kind != EKind::ConstInt ||
          at.i % valuesPerRegister(to.dtype) != 0) {
        packed_[st.var] = false;
      }
    }
    if (st.kind == SKind::SharedAtomicAdd) {  // written in place, as its own type
      ++writes_[st.target];
      float_copy_[st.target] = packed_[st.target] = byte_words_[st.target] = false;
    }
    if (st.kind == SKind::Mma) mmas_.push_back(&st);
    if (st.kind == SKind::Wgmma) wgmma_accumulator_[st.var] = true;
    DataType stored = DataType::Null;  // the type a store of st.b rounds to
    if (st.kind == SKind::Store) stored = k_.tensors[st.tensor].dtype;
    if (st.kind == SKind::LocalWrite && k_.vars[st.var].storage) stored = k_.vars[st.var].dtype;
    for (ExprId id : {st.a, st.b, st.c, st.d, st.e}) {
      if (id < 0) continue;
      const KExpr& x = k_.exprs[id];
      if (x.kind == EKind::LocalRead) {
        only_as_float_[x.ref] = packed_[x.ref] = false;
        // Kept only where the read is the value a store into a shared tile of the array's type writes.
        const bool stored_as_is = st.kind == SKind::LocalWrite && id == st.b && k_.vars[st.var].storage &&
                                  k_.vars[st.var].dtype == k_.vars[x.ref].dtype;
        if (!stored_as_is) byte_words_[x.ref] = false;
      }
      if (x.kind == EKind::VarRef && !(id == st.b && stored == k_.vars[x.ref].dtype)) stored_only_[x.ref] = false;
    }
    walk(st.body);
    walk(st.orelse);
  }
}

}  // namespace braze::codegen
