#include "codegen/var_uses.h"

namespace braze::kernel {
namespace {

bool isNarrowFloat(DataType d) {
  return d == DataType::BFloat16 || d == DataType::Half || d == DataType::Float8_e4m3fn || d == DataType::Float8_e5m2;
}

}  // namespace

VarUses::VarUses(const Kernel& kernel) : k_(kernel) {
  const size_t n = k_.vars.size();
  writes_.assign(n, 0);
  definition_.assign(n, -1);
  float_copy_.assign(n, false);
  only_as_float_.assign(n, false);
  stored_only_.assign(n, false);
  for (size_t v = 0; v < n; ++v) {
    const KVar& var = k_.vars[v];
    float_copy_[v] = var.kind == VarKind::LocalArray && (var.dtype == DataType::Int8 || var.dtype == DataType::UInt8);
    only_as_float_[v] = float_copy_[v];
    stored_only_[v] = var.kind == VarKind::Scalar && isNarrowFloat(var.dtype);
  }
  // Reads by expressions: an array element read by anything but a conversion to float, and any read of
  // a scalar as an operand.
  std::vector<bool> read_as_float(n, false);
  for (const KExpr& x : k_.exprs) {
    const bool to_float = x.kind == EKind::Cast && x.dtype == DataType::Float;
    for (ExprId a : x.args) {
      const KExpr& arg = k_.exprs[a];
      if (arg.kind == EKind::LocalRead && to_float) read_as_float[arg.ref] = true;
      if (arg.kind == EKind::LocalRead && !to_float) only_as_float_[arg.ref] = false;
      if (arg.kind == EKind::VarRef) stored_only_[arg.ref] = false;
    }
  }
  walk(k_.body);
  for (size_t v = 0; v < n; ++v) {
    float_copy_[v] = float_copy_[v] && read_as_float[v];
    only_as_float_[v] = only_as_float_[v] && float_copy_[v];
    stored_only_[v] = stored_only_[v] && singleLet(static_cast<VarId>(v));
  }
}

void VarUses::walk(const std::vector<Stmt>& stmts) {
  for (const Stmt& st : stmts) {
    if (st.var >= 0) {
      ++writes_[st.var];
      if (st.kind == SKind::Let) definition_[st.var] = st.a;
      if (st.kind != SKind::VecLoad && st.kind != SKind::Declare) float_copy_[st.var] = false;
    }
    DataType stored = DataType::Null;  // the type a store of st.b rounds to
    if (st.kind == SKind::Store) stored = k_.tensors[st.tensor].dtype;
    if (st.kind == SKind::LocalWrite && k_.vars[st.var].storage) stored = k_.vars[st.var].dtype;
    for (ExprId id : {st.a, st.b, st.c}) {
      if (id < 0) continue;
      const KExpr& x = k_.exprs[id];
      if (x.kind == EKind::LocalRead) only_as_float_[x.ref] = false;
      if (x.kind == EKind::VarRef && !(id == st.b && stored == k_.vars[x.ref].dtype)) stored_only_[x.ref] = false;
    }
    walk(st.body);
    walk(st.orelse);
  }
}

}  // namespace braze::kernel
