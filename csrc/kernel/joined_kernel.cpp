#include "kernel/joined_kernel.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace braze::kernel {
namespace {

KExpr indexExpr(EKind kind, int64_t i = 0, ExprArgs args = {}) {
  KExpr e;
  e.kind = kind;
  e.dtype = DataType::Int64;
  e.index = true;
  e.i = i;
  e.args = std::move(args);
  return e;
}

KExpr lessThan(ExprId a, ExprId b) {
  KExpr e = indexExpr(EKind::Lt, 0, {a, b});
  e.dtype = DataType::Bool;
  e.index = false;
  return e;
}

// Where one part's ids land in the joined kernel.
struct PartMap {
  std::vector<ExprId> exprs;
  std::vector<VarId> vars;
  std::vector<TensorId> tensors;
  std::vector<int32_t> arguments;

  VarId var(VarId v) const { return v < 0 ? v : vars[static_cast<size_t>(v)]; }
  ExprId expr(ExprId e) const { return e < 0 ? e : exprs[static_cast<size_t>(e)]; }
};

Stmt remapped(const Stmt& s, const PartMap& map) {
  Stmt out = s;
  out.var = map.var(s.var);
  out.target = map.var(s.target);
  for (VarId& v : out.mma_operands) v = map.var(v);
  if (s.tensor >= 0) out.tensor = map.tensors[static_cast<size_t>(s.tensor)];
  out.a = map.expr(s.a);
  out.b = map.expr(s.b);
  out.c = map.expr(s.c);
  out.d = map.expr(s.d);
  out.e = map.expr(s.e);
  out.body.clear();
  out.orelse.clear();
  for (const Stmt& inner : s.body) out.body.push_back(remapped(inner, map));
  for (const Stmt& inner : s.orelse) out.orelse.push_back(remapped(inner, map));
  return out;
}

class Joiner {
 public:
  Joiner(Kernel& into, const std::vector<Kernel>& parts) : into_(into), parts_(parts) {}

  void join() {
    BRAZE_ASSERT(!parts_.empty() && into_.exprs.empty() && into_.body.empty(), "kernel {}: nothing to join into",
                 into_.name);
    const Kernel& first = parts_.front();
    const int64_t threads = first.threadsPerBlock();
    for (const Kernel& part : parts_) {
      const bool same_block = part.block == first.block || (part.block[1] == 1 && part.block[0] == threads);
      BRAZE_ASSERT(same_block && part.warp_size == first.warp_size && part.check_indices == first.check_indices,
                   "kernel {}: parts {} and {} differ in block shape, warp size or index checks", into_.name, first.name,
                   part.name);
      BRAZE_ASSERT(part.cluster == 1, "kernel {}: part {} runs in clusters", into_.name, part.name);
    }
    for (const TensorParam& t : into_.tensors) names_.insert(t.name);
    // The block and thread indices and the part bounds first: every part's exprs come after their operands.
    const ExprId block_x = push(indexExpr(EKind::BlockIdx, 0));
    const ExprId thread_x = push(indexExpr(EKind::ThreadIdx, 0));
    const ExprId thread_y = push(indexExpr(EKind::ThreadIdx, 1));
    // A part of a one-dimensional block sees the thread's place in the whole block.
    const ExprId linear_thread =
        push(indexExpr(EKind::Add, 0, {push(indexExpr(EKind::Mul, 0, {thread_y, constant(first.block[0])})), thread_x}));
    // Where each part's blocks end is a launch argument: sizes that change only the parts' block counts (another
    // batch) share the compiled kernel, as a kernel of one part whose element count is an argument does.
    std::vector<ExprId> in_range;
    std::vector<std::vector<Stmt>> bodies;
    int64_t begin = 0;
    ExprId begin_expr = -1;
    for (const Kernel& part : parts_) {
      const int64_t blocks_x = std::max<int64_t>(part.grid[0], 1);
      const ExprId local = begin_expr < 0 ? block_x : push(indexExpr(EKind::Sub, 0, {block_x, begin_expr}));
      OwnIndices own;
      own.block_x = part.grid[1] == 1 ? local : push(indexExpr(EKind::Mod, 0, {local, constant(blocks_x)}));
      own.block_y = part.grid[1] == 1 ? constant(0) : push(indexExpr(EKind::Div, 0, {local, constant(blocks_x)}));
      if (part.block != first.block) {
        own.thread_x = linear_thread;
        own.thread_y = constant(0);
      }
      begin += part.grid[0] * part.grid[1];
      const bool last = bodies.size() + 1 == parts_.size();
      begin_expr = last ? -1 : blocksEnd(bodies.size(), begin);
      in_range.push_back(last ? -1 : push(lessThan(block_x, begin_expr)));
      bodies.push_back(addPart(bodies.size(), own));
    }
    // if (blockIdx.x < end of part 0) { part 0 } else if (blockIdx.x < end of part 1) { part 1 } ... else { last }
    std::vector<Stmt> chain = std::move(bodies.back());
    for (size_t p = parts_.size() - 1; p-- > 0;) {
      Stmt branch;
      branch.kind = SKind::If;
      branch.a = in_range[p];
      branch.body = std::move(bodies[p]);
      branch.orelse = std::move(chain);
      chain = {std::move(branch)};
    }
    into_.body.mut() = std::move(chain);
    into_.grid = {begin, 1};
    into_.block = first.block;
    into_.warp_size = first.warp_size;
    into_.vectorize = first.vectorize;
    into_.check_indices = first.check_indices;
    for (const Kernel& part : parts_) {
      into_.index64 = into_.index64 || part.index64;
      into_.arch_specific = into_.arch_specific || part.arch_specific;
      into_.shared_bytes = std::max(into_.shared_bytes, part.shared_bytes);
    }
  }

 private:
  // What part p's block and thread indices are in the joined kernel (-1: the joined kernel's own).
  struct OwnIndices {
    ExprId block_x = -1, block_y = -1, thread_x = -1, thread_y = -1;
  };

  ExprId push(KExpr e) {
    auto& exprs = into_.exprs.mut();
    exprs.push_back(std::move(e));
    return static_cast<ExprId>(exprs.size() - 1);
  }
  ExprId constant(int64_t value) { return push(indexExpr(EKind::ConstInt, value)); }

  // The launch argument saying where part p's blocks end (`value` at this launch).
  ExprId blocksEnd(size_t p, int64_t value) {
    ScalarArgument bound{fmt::format("part{}_blocks_end", p), true, DataType::Int64, value};
    BRAZE_ASSERT(names_.insert(bound.name).second, "kernel {}: two parameters named {}", into_.name, bound.name);
    into_.arguments.push_back(std::move(bound));
    KExpr e = indexExpr(EKind::Argument);
    e.ref = static_cast<int32_t>(into_.arguments.size() - 1);
    return push(std::move(e));
  }

  // Part p's code, its ids mapped into the joined kernel, its block (and, for a one-dimensional block, thread)
  // indices its own.
  std::vector<Stmt> addPart(size_t p, const OwnIndices& own) {
    const Kernel& part = parts_[p];
    if (own.thread_x >= 0) {
      BRAZE_ASSERT(!reducesAcrossThreads(part.body), "kernel {}: part {} of a one-dimensional block reduces across threads",
                   into_.name, part.name);
    }
    PartMap map;
    for (const TensorParam& t : part.tensors) map.tensors.push_back(tensorOf(t));
    for (const ScalarArgument& a : part.arguments) map.arguments.push_back(argumentOf(a, p));
    auto& vars = into_.vars.mut();
    for (const KVar& v : part.vars) {
      map.vars.push_back(static_cast<VarId>(vars.size()));
      vars.push_back(v);
      if (p > 0) vars.back().name += fmt::format("_p{}", p);  // one scope's names, whatever the emitter hoists
    }
    auto& exprs = into_.exprs.mut();
    for (const KExpr& e : part.exprs) {
      KExpr out = e;
      for (ExprId& a : out.args) a = map.expr(a);
      switch (e.kind) {
        case EKind::VarRef:
        case EKind::LocalRead: out.ref = map.var(e.ref); break;
        case EKind::Load: out.ref = map.tensors[static_cast<size_t>(e.ref)]; break;
        case EKind::Argument: out.ref = map.arguments[static_cast<size_t>(e.ref)]; break;
        default: break;
      }
      ExprId mapped = -1;
      if (e.kind == EKind::BlockIdx) mapped = e.i == 0 ? own.block_x : own.block_y;
      if (e.kind == EKind::ThreadIdx) mapped = e.i == 0 ? own.thread_x : own.thread_y;
      exprs.push_back(std::move(out));
      map.exprs.push_back(mapped >= 0 ? mapped : static_cast<ExprId>(exprs.size() - 1));
    }
    std::vector<Stmt> body;
    for (const Stmt& s : part.body) body.push_back(remapped(s, map));
    return body;
  }

  static bool reducesAcrossThreads(const std::vector<Stmt>& body) {
    return std::any_of(body.begin(), body.end(), [](const Stmt& s) {
      return s.kind == SKind::BlockReduce || reducesAcrossThreads(s.body) || reducesAcrossThreads(s.orelse);
    });
  }

  TensorId tensorOf(const TensorParam& t) {
    auto& tensors = into_.tensors;
    if (t.index_errors) {
      if (!into_.index_errors) {
        BRAZE_ASSERT(names_.insert(t.name).second, "kernel {}: two parameters named {}", into_.name, t.name);
        into_.index_errors = static_cast<TensorId>(tensors.size());
        tensors.push_back(t);
      }
      return *into_.index_errors;
    }
    if (t.val != nullptr && !t.workspace) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].val == t.val && tensors[i].output == t.output && !tensors[i].workspace) {
          BRAZE_ASSERT(!t.tma, "kernel {}: a joined part reads {} through TMA", into_.name, t.name);
          return static_cast<TensorId>(i);
        }
      }
      BRAZE_ASSERT(false, "kernel {}: a joined part's tensor {} is none of the kernel's", into_.name, t.name);
    }
    TensorParam scratch = t;
    for (int n = 1; !names_.insert(scratch.name).second; ++n) scratch.name = fmt::format("{}_{}", t.name, n);
    tensors.push_back(std::move(scratch));
    return static_cast<TensorId>(tensors.size() - 1);
  }

  int32_t argumentOf(const ScalarArgument& a, size_t p) {
    auto& arguments = into_.arguments;
    // One scalar input of the fusion is one argument. Other values (extents) stay each part's own, so the
    // source does not depend on whether two parts' happen to be equal.
    for (size_t i = 0; i < arguments.size() && a.input != nullptr; ++i) {
      if (arguments[i].input == a.input && arguments[i].dtype == a.dtype) return static_cast<int32_t>(i);
    }
    ScalarArgument own = a;
    for (int n = 0; !names_.insert(own.name).second; ++n) {
      own.name = fmt::format("{}_p{}{}", a.name, p, n == 0 ? "" : fmt::format("_{}", n));
    }
    arguments.push_back(std::move(own));
    return static_cast<int32_t>(arguments.size() - 1);
  }

  Kernel& into_;
  const std::vector<Kernel>& parts_;
  std::unordered_set<std::string> names_;  // the joined kernel's parameter names
};

}  // namespace

void joinKernels(Kernel& into, const std::vector<Kernel>& parts) { Joiner(into, parts).join(); }

}  // namespace braze::kernel
