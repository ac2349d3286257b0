// KernelBuilder's statements: the blocks they go to (the kernel's body, an open for or if, a pushed
// target), and one builder per statement kind. Expressions, variables and tensors are in kernel_ir.cpp.
#include "kernel/kernel_ir.h"
#include "support/by_id.h"

#include "support/error.h"

#include <utility>

namespace braze::kernel {

std::vector<Stmt>& KernelBuilder::current() { return open_.empty() ? k_.body.mut() : *open_.back().target; }

void KernelBuilder::pushTarget(std::vector<Stmt>* target) { open_.push_back({nullptr, target}); }

void KernelBuilder::popTarget() {
  BRAZE_ASSERT(!open_.empty() && open_.back().stmt == nullptr, "popTarget without a pushed target");
  open_.pop_back();
}

void KernelBuilder::pushBare(SKind kind, VarId var, int32_t width) {
  push(Stmt{.kind = kind, .var = var, .width = width});
}

void KernelBuilder::push(Stmt s) { current().push_back(std::move(s)); }

void KernelBuilder::let(VarId var, ExprId value) {
  push(Stmt{.kind = SKind::Let, .var = var, .a = value});
}

ExprId KernelBuilder::letValue(std::string prefix, ExprId value) {
  const KExpr& e = k_.exprs[value];
  if (e.kind == EKind::ConstInt || e.kind == EKind::ConstFloat || e.kind == EKind::ConstBool ||
      e.kind == EKind::VarRef) {
    return value;
  }
  const bool is_index = e.index;  // read before anything is interned (which may move k_.exprs)
  const VarId var = scalarVar(std::move(prefix), e.dtype, is_index);
  let(var, value);
  if (is_index) setVarBounds(var, bounds(value));  // a fresh variable, assigned once
  ExprId& bound = entryAt(bound_values_, static_cast<size_t>(var), ExprId{-1});
  if (bound < 0) bound = value;
  return ref(var);
}

void KernelBuilder::assign(VarId var, ExprId value) {
  push(Stmt{.kind = SKind::Assign, .var = var, .a = value});
}

void KernelBuilder::declare(VarId array) { pushBare(SKind::Declare, array); }

void KernelBuilder::pushOnVar(SKind kind, VarId var, ExprId a, ExprId b, int32_t width) {
  push(Stmt{.kind = kind, .var = var, .a = a, .b = b, .width = width});
}

void KernelBuilder::localWrite(VarId array, ExprId at, ExprId value) { pushOnVar(SKind::LocalWrite, array, at, value); }

void KernelBuilder::store(TensorId tensor, ExprId offset, ExprId value) {
  push(Stmt{.kind = SKind::Store, .tensor = tensor, .a = offset, .b = value});
}

void KernelBuilder::vecLoad(VarId array, ExprId at, TensorId tensor, ExprId offset, int width) {
  push(Stmt{.kind = SKind::VecLoad, .var = array, .tensor = tensor, .a = offset, .b = at, .width = width});
}

void KernelBuilder::sharedVecLoad(VarId array, ExprId at, VarId shared, ExprId from, int width) {
  push(Stmt{.kind = SKind::SharedVecLoad, .var = array, .a = from, .b = at, .width = width, .target = shared});
}

void KernelBuilder::vecStore(TensorId tensor, ExprId offset, VarId array, ExprId at, int width) {
  push(Stmt{.kind = SKind::VecStore, .var = array, .tensor = tensor, .a = offset, .b = at, .width = width});
}

void KernelBuilder::blockReduce(VarId var, ReduceOp op, int axis) {
  push(Stmt{.kind = SKind::BlockReduce, .var = var, .axis = axis, .reduce = op});
}

void KernelBuilder::barrier() { pushBare(SKind::Barrier); }

void KernelBuilder::fence() { pushBare(SKind::Fence); }

void KernelBuilder::atomicAdd(VarId old_value, TensorId tensor, ExprId offset, ExprId value) {
  BRAZE_ASSERT(k_.tensors[tensor].dtype == DataType::Int32, "atomicAdd on {} of dtype {}", k_.tensors[tensor].name,
               toString(k_.tensors[tensor].dtype));
  push(Stmt{.kind = SKind::AtomicAdd, .var = old_value, .tensor = tensor, .a = offset, .b = value});
}

void KernelBuilder::sharedAtomicAdd(VarId old_value, VarId array, ExprId at, ExprId value) {
  const KVar& v = k_.vars[array];
  BRAZE_ASSERT(v.kind == VarKind::SharedArray && v.storage && v.dtype == DataType::Int32,
               "a shared atomic add on {} of dtype {} (a shared Int32 array held as stored)", v.name, toString(v.dtype));
  push(Stmt{.kind = SKind::SharedAtomicAdd, .var = old_value, .a = at, .b = value, .target = array});
}

void KernelBuilder::mma(MmaShape shape, VarId d, VarId a, VarId b, VarId c, int32_t b_offset) {
  push(Stmt{.kind = SKind::Mma, .var = d, .mma_shape = shape, .mma_operands = {a, b, c}, .b_offset = b_offset});
}

void KernelBuilder::cpAsync(VarId shared, ExprId at, TensorId tensor, ExprId offset, int width, ExprId src_bytes) {
  push(Stmt{.kind = SKind::CpAsync, .var = shared, .tensor = tensor, .a = offset, .b = at, .c = src_bytes,
              .width = width});
}

void KernelBuilder::cpAsyncCommit() { pushBare(SKind::CpAsyncCommit); }

void KernelBuilder::cpAsyncWait(int pending_groups) { pushBare(SKind::CpAsyncWait, -1, pending_groups); }

void KernelBuilder::ldmatrix(VarId fragment, ExprId at, VarId shared, ExprId row, int matrices, bool transpose) {
  push(Stmt{.kind = SKind::Ldmatrix, .var = fragment, .a = row, .b = at, .width = matrices, .transpose = transpose,
              .mma_operands = {shared, -1, -1}});
}

void KernelBuilder::wgmma(VarId acc, int n, VarId a_tiles, ExprId a_at, const WgmmaOperand& a, VarId b_tiles,
                          ExprId b_at, const WgmmaOperand& b) {
  Stmt s;
  s.kind = SKind::Wgmma;
  s.var = acc;
  s.width = n;
  s.mma_operands = {a_tiles, b_tiles, -1};
  s.a = a_at;
  s.b = b_at;
  s.wgmma_operands = {a, b};
  k_.arch_specific = true;
  push(std::move(s));
}

void KernelBuilder::wgmmaFence(VarId accumulators) { pushBare(SKind::WgmmaFence, accumulators); }

void KernelBuilder::wgmmaCommit() { pushBare(SKind::WgmmaCommit); }

void KernelBuilder::wgmmaWait(int pending_groups, VarId accumulators) {
  pushBare(SKind::WgmmaWait, accumulators, pending_groups);
}

void KernelBuilder::proxyFence() { pushBare(SKind::ProxyFence); }

void KernelBuilder::mbarrierInit(VarId mbarriers, ExprId at, int arrivals) {
  pushOnVar(SKind::MbarrierInit, mbarriers, at, -1, arrivals);
}

void KernelBuilder::mbarrierArriveExpectTx(VarId mbarriers, ExprId at, ExprId bytes, ExprId rank) {
  push(Stmt{.kind = SKind::MbarrierArriveExpectTx, .var = mbarriers, .a = at, .b = bytes, .c = rank});
}

void KernelBuilder::clusterBarrier() { pushBare(SKind::ClusterBarrier); }

void KernelBuilder::mbarrierWait(VarId mbarriers, ExprId at, ExprId parity) {
  pushOnVar(SKind::MbarrierWait, mbarriers, at, parity);
}

void KernelBuilder::setMaxNReg(int registers, bool increase) {
  push(Stmt{.kind = SKind::SetMaxNReg, .width = registers, .axis = increase ? 1 : 0});
}

void KernelBuilder::tmaLoad(VarId shared, ExprId at, TensorId tensor, ExprId column, ExprId row, VarId mbarriers,
                            ExprId barrier, ExprId batch, int32_t multicast) {
  Stmt s{.kind = SKind::TmaLoad, .var = shared, .tensor = tensor, .a = at, .b = column, .c = row, .d = barrier, .e = batch};
  s.mma_operands[0] = mbarriers;
  s.multicast = multicast;
  if (multicast != 0) k_.arch_specific = true;  // .multicast::cluster is sm_90a's
  push(std::move(s));
}

void KernelBuilder::openFor(VarId var, ExprId begin, ExprId end, ExprId step, bool unroll) {
  // In the body, var runs over [begin, end) upwards (the range of this loop: a variable some other
  // loop reuses gets that loop's range when it is opened).
  const auto b = bounds(begin), e = bounds(end);
  const auto s_step = constValue(step);
  setVarBounds(var, b && e && s_step && *s_step > 0 && e->hi > b->lo
                        ? std::optional<Bounds>(Bounds{b->lo, e->hi - 1})
                        : std::nullopt);
  push(Stmt{.kind = SKind::For, .var = var, .a = begin, .b = end, .c = step, .unroll = unroll});
  Stmt* opened = &current().back();
  open_.push_back({opened, &opened->body});
}

void KernelBuilder::openIf(ExprId cond) {
  push(Stmt{.kind = SKind::If, .a = cond});
  Stmt* opened = &current().back();
  open_.push_back({opened, &opened->body});
}

void KernelBuilder::openConcurrentIf(ExprId cond) {
  openIf(cond);
  open_.back().stmt->concurrent = true;
}

void KernelBuilder::openElse() {
  BRAZE_ASSERT(!open_.empty() && open_.back().stmt != nullptr && open_.back().stmt->kind == SKind::If,
               "openElse without an open if");
  open_.back().target = &open_.back().stmt->orelse;
}

void KernelBuilder::close() {
  BRAZE_ASSERT(!open_.empty() && open_.back().stmt != nullptr, "close without an open block");
  open_.pop_back();
}

}  // namespace braze::kernel
