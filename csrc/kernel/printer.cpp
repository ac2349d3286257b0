#include "kernel/printer.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace braze::kernel {
namespace {

class KernelPrinter {
 public:
  explicit KernelPrinter(const Kernel& k) : k_(k) {
    std::map<std::string, int> count;
    for (const KVar& v : k.vars) ++count[v.name];
    for (size_t i = 0; i < k.vars.size(); ++i) {
      names_.push_back(count[k.vars[i].name] > 1 ? fmt::format("{}_{}", k.vars[i].name, i) : k.vars[i].name);
    }
  }

  std::string run() {
    line(0, "kernel {}", k_.name);
    line(1, "summary: {}", k_.summary);
    line(1, "launch: grid {}x{}, block {}x{} (warps of {}), shared {} bytes, {}-bit indices, vectorize {}{}", k_.grid[0],
         k_.grid[1], k_.block[0], k_.block[1], k_.warp_size, k_.shared_bytes, k_.index64 ? 64 : 32, k_.vectorize,
         k_.cluster > 1 ? fmt::format(", clusters of {} blocks", k_.cluster) : std::string());
    for (const TensorParam& p : k_.tensors) {
      const char* role = p.index_errors ? "index errors"
                         : p.workspace  ? (p.zeroed ? "workspace, zeroed" : "workspace")
                         : p.output     ? "output"
                                        : "input";
      const std::string tma =
          p.tma ? fmt::format(", TMA boxes of {}x{}{} of [{}] strides [{}] offset {}", p.tma->box_rows,
                              p.tma->box_columns, p.tma->swizzle ? " swizzled" : "", fmt::join(p.tma->map.sizes, ", "),
                              fmt::join(p.tma->map.strides, ", "), p.tma->map.offset)
                : "";
      line(1, "tensor {}: {}[{}] strides [{}] offset {} align {} ({}{})", p.name, toString(p.dtype),
           fmt::join(p.layout.sizes, ", "), fmt::join(p.layout.strides, ", "), p.layout.offset, p.alignment_bytes, role,
           tma);
    }
    for (const ScalarArgument& a : k_.arguments) {
      line(1, "argument {}: {} = {}", a.name, a.index ? "index" : toString(a.dtype), ::braze::toString(a.value));
    }
    for (size_t v = 0; v < k_.vars.size(); ++v) {
      const KVar& var = k_.vars[v];
      if (var.kind == VarKind::Scalar) continue;
      if (var.kind == VarKind::Mbarriers) {
        line(1, "mbarriers {}: {} at byte {}", names_[v], var.size, var.shared_offset);
        continue;
      }
      line(1, "{} array {}: {}[{}]{}", var.kind == VarKind::SharedArray ? "shared" : "local", names_[v],
           toString(var.dtype), var.size,
           var.kind == VarKind::SharedArray ? fmt::format(" at byte {}{}", var.shared_offset, var.storage ? " (as stored)" : "")
                                            : "");
    }
    block(k_.body, 1);
    return out_;
  }

 private:
  template <typename... Args>
  void line(int depth, fmt::format_string<Args...> text, Args&&... args) {
    out_ += std::string(2 * depth, ' ');
    out_ += fmt::format(text, std::forward<Args>(args)...);
    out_ += '\n';
  }

  std::string expr(ExprId id) const {
    const KExpr& e = k_.exprs[id];
    auto arg = [&](size_t i) { return expr(e.args[i]); };
    auto infix = [&](const char* op) { return fmt::format("({} {} {})", arg(0), op, arg(1)); };
    switch (e.kind) {
      case EKind::ConstInt: return std::to_string(e.i);
      case EKind::ConstFloat: return fmt::format("{}:{}", e.f, toString(e.dtype));
      case EKind::ConstBool: return e.i != 0 ? "true" : "false";
      case EKind::VarRef: return names_[e.ref];
      case EKind::ThreadIdx: return e.i == 0 ? "threadIdx.x" : "threadIdx.y";
      case EKind::BlockIdx: return e.i == 0 ? "blockIdx.x" : "blockIdx.y";
      case EKind::Add: return infix("+");
      case EKind::Sub: return infix("-");
      case EKind::Mul: return infix("*");
      case EKind::Div: return infix("/");
      case EKind::Mod: return infix("%");
      case EKind::Min: return fmt::format("min({}, {})", arg(0), arg(1));
      case EKind::Xor: return fmt::format("({} ^ {})", arg(0), arg(1));
      case EKind::BitAnd: return fmt::format("({} & {})", arg(0), arg(1));
      case EKind::WarpUniform: return fmt::format("warp_uniform({})", arg(0));
      case EKind::OrderKey: return fmt::format("order_key({})", arg(0));
      case EKind::ClusterRank: return "cluster_rank";
      case EKind::Lt: return infix("<");
      case EKind::Le: return infix("<=");
      case EKind::Eq: return infix("==");
      case EKind::And: return infix("&&");
      case EKind::Or: return infix("||");
      case EKind::Not: return fmt::format("!{}", arg(0));
      case EKind::Select: return fmt::format("({} ? {} : {})", arg(0), arg(1), arg(2));
      case EKind::Elementwise: {
        std::vector<std::string> args;
        for (size_t i = 0; i < e.args.size(); ++i) args.push_back(arg(i));
        return fmt::format("{}:{}({})", opName(e.op), toString(e.dtype), fmt::join(args, ", "));
      }
      case EKind::Cast: return fmt::format("cast<{} -> {}>({})", toString(e.from), toString(e.dtype), arg(0));
      case EKind::Fma: return fmt::format("fma({}, {}, {})", arg(0), arg(1), arg(2));
      case EKind::IndexToValue: return fmt::format("value<{}>({})", toString(e.dtype), arg(0));
      case EKind::ValueToIndex: return fmt::format("index({})", arg(0));
      case EKind::CheckedIndex: return fmt::format("checked({}, {}, site {:#x})", arg(0), arg(1), e.i);
      case EKind::RandomUnit:
        return fmt::format("{}({}, {}, {})", e.op == OpKind::Uniform ? "uniform_unit" : "standard_normal", arg(0),
                           arg(1), arg(2));
      case EKind::Load: return fmt::format("{}[{}]", k_.tensors[e.ref].name, arg(0));
      case EKind::LocalRead: return fmt::format("{}[{}]", names_[e.ref], arg(0));
      case EKind::Argument: return k_.arguments[e.ref].name;
    }
    BRAZE_UNREACHABLE("kernel {}: expression kind {}", k_.name, static_cast<int>(e.kind));
  }

  void block(const std::vector<Stmt>& stmts, int depth) {
    for (const Stmt& s : stmts) one(s, depth);
  }

  void one(const Stmt& s, int depth) {
    auto var = [&] { return names_[s.var]; };
    auto tensor = [&] { return k_.tensors[s.tensor].name; };
    switch (s.kind) {
      case SKind::Let: line(depth, "let {} = {}", var(), expr(s.a)); return;
      case SKind::Assign: line(depth, "{} = {}", var(), expr(s.a)); return;
      case SKind::Declare: line(depth, "declare {}", var()); return;
      case SKind::LocalWrite: line(depth, "{}[{}] = {}", var(), expr(s.a), expr(s.b)); return;
      case SKind::For:
        line(depth, "for {} in [{}, {}) step {}{}:", var(), expr(s.a), expr(s.b), expr(s.c), s.unroll ? " unrolled" : "");
        block(s.body, depth + 1);
        return;
      case SKind::If:
        line(depth, "if {}{}:", expr(s.a), s.concurrent ? " (branches at once)" : "");
        block(s.body, depth + 1);
        if (!s.orelse.empty()) {
          line(depth, "else:");
          block(s.orelse, depth + 1);
        }
        return;
      case SKind::Store: line(depth, "{}[{}] = {}", tensor(), expr(s.a), expr(s.b)); return;
      case SKind::VecLoad:
        line(depth, "{}[{} .. +{}] = vector_load<{}>({}[{}])", var(), expr(s.b), s.width, s.width, tensor(), expr(s.a));
        return;
      case SKind::VecStore:
        line(depth, "vector_store<{}>({}[{}]) = {}[{} .. +{}]", s.width, tensor(), expr(s.a), var(), expr(s.b), s.width);
        return;
      case SKind::BlockReduce:
        line(depth, "{} = block_reduce<{}, threadIdx.{}>({})", var(), toString(s.reduce), s.axis == 0 ? "x" : "y", var());
        return;
      case SKind::Barrier: line(depth, "barrier"); return;
      case SKind::ClusterBarrier: line(depth, "cluster_barrier"); return;
      case SKind::Fence: line(depth, "fence"); return;
      case SKind::AtomicAdd: line(depth, "let {} = atomic_add({}[{}], {})", var(), tensor(), expr(s.a), expr(s.b)); return;
      case SKind::SharedVecLoad:
        line(depth, "{}[{} .. +{}] = vector_load<{}>({}[{}])", var(), expr(s.b), s.width, s.width, k_.vars[s.target].name,
             expr(s.a));
        return;
      case SKind::SharedAtomicAdd:
        if (s.var >= 0) {
          line(depth, "let {} = atomic_add({}[{}], {})", var(), k_.vars[s.target].name, expr(s.a), expr(s.b));
        } else {
          line(depth, "atomic_add({}[{}], {})", k_.vars[s.target].name, expr(s.a), expr(s.b));
        }
        return;
      case SKind::Mma:
        line(depth, "{} = mma.{}({}, {}{}, {})", var(), toString(s.mma_shape), k_.vars[s.mma_operands[0]].name,
             k_.vars[s.mma_operands[1]].name, s.b_offset != 0 ? fmt::format("[{}:]", s.b_offset) : "",
             k_.vars[s.mma_operands[2]].name);
        return;
      case SKind::CpAsync:
        line(depth, "{}[{} .. +{}] = cp_async({}[{}], {} bytes read)", var(), expr(s.b), s.width, tensor(), expr(s.a),
             expr(s.c));
        return;
      case SKind::CpAsyncCommit: line(depth, "cp_async_commit"); return;
      case SKind::CpAsyncWait: line(depth, "cp_async_wait({} in flight)", s.width); return;
      case SKind::Ldmatrix:
        line(depth, "{}[{} ..] = ldmatrix.x{}{}({}[{}])", var(), expr(s.b), s.width, s.transpose ? ".trans" : "",
             k_.vars[s.mma_operands[0]].name, expr(s.a));
        return;
      case SKind::Wgmma: {
        auto operand = [&](int i, ExprId at) {
          const WgmmaOperand& o = s.wgmma_operands[i];
          return fmt::format("{}[{}] ({}, LBO {}, SBO {})", k_.vars[s.mma_operands[i]].name, expr(at),
                             o.mn_major ? "mn-major" : "k-major", o.leading_bytes, o.stride_bytes);
        };
        line(depth, "{} += wgmma.m64n{}k16({}, {})", var(), s.width, operand(0, s.a), operand(1, s.b));
        return;
      }
      case SKind::WgmmaFence: line(depth, "wgmma_fence"); return;
      case SKind::WgmmaCommit: line(depth, "wgmma_commit"); return;
      case SKind::WgmmaWait: line(depth, "wgmma_wait({} in flight)", s.width); return;
      case SKind::ProxyFence: line(depth, "proxy_fence_async_shared"); return;
      case SKind::MbarrierInit: line(depth, "mbarrier_init({}[{}], {} arrivals)", var(), expr(s.a), s.width); return;
      case SKind::MbarrierArriveExpectTx:
        line(depth, "mbarrier_arrive_expect_tx({}[{}]{}, {} bytes)", var(), expr(s.a),
             s.c >= 0 ? " of cluster rank " + expr(s.c) : std::string(), expr(s.b));
        return;
      case SKind::MbarrierWait: line(depth, "mbarrier_wait({}[{}], parity {})", var(), expr(s.a), expr(s.b)); return;
      case SKind::SetMaxNReg: line(depth, "setmaxnreg {} {}", s.axis == 1 ? "inc" : "dec", s.width); return;
      case SKind::TmaLoad:
        line(depth, "{}[{} ..] = tma_load({} box at column {}, row {}{}; completes on {}[{}])", var(), expr(s.a), tensor(),
             expr(s.b), expr(s.c), s.e >= 0 ? ", batch " + expr(s.e) : std::string(), names_[s.mma_operands[0]],
             expr(s.d));
        if (s.multicast != 0) line(depth + 1, "multicast to cluster ranks {:#x}", s.multicast);
        return;
    }
  }

  const Kernel& k_;
  std::vector<std::string> names_;
  std::string out_;
};

}  // namespace

std::string printKernel(const Kernel& kernel) { return KernelPrinter(kernel).run(); }

}  // namespace braze::kernel
