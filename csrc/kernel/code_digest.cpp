#include "kernel/code_digest.h"

#include <bit>
#include <string_view>
#include <vector>

namespace braze::kernel {
namespace {

// Two independent multiply-xorshift lanes: a collision needs both to collide.
class Digester {
 public:
  void add(uint64_t v) {
    low_ = (low_ ^ v) * 0x9e3779b97f4a7c15ULL;
    low_ ^= low_ >> 29;
    high_ = (high_ + v) * 0xc2b2ae3d27d4eb4fULL;
    high_ ^= high_ >> 31;
  }
  void add(const CodeDigest& d) {
    add(d.low);
    add(d.high);
  }
  void add(std::string_view s) {
    add(static_cast<uint64_t>(s.size()));
    uint64_t word = 0;
    size_t filled = 0;
    for (char c : s) {
      word = (word << 8) | static_cast<unsigned char>(c);
      if (++filled == 8) {
        add(word);
        word = 0;
        filled = 0;
      }
    }
    if (filled > 0) add(word);
  }
  CodeDigest digest() const { return {low_, high_}; }

  static uint64_t pack(int32_t a, int32_t b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }

 private:
  uint64_t low_ = 0x243f6a8885a308d3ULL;
  uint64_t high_ = 0x13198a2e03707344ULL;
};

// Expressions enter the digest by their structure, as statements reach them (reachedExpressions): the
// source names no other.
class KernelDigester {
 public:
  explicit KernelDigester(const Kernel& k) : k_(k), digests_(k.exprs.size()) {
    const std::vector<bool> reached = reachedExpressions(k);
    for (size_t i = 0; i < k.exprs.size(); ++i) {
      if (reached[i]) digests_[i] = digestOf(k.exprs[i]);
    }
  }

  void addStmts(Digester& d, const std::vector<Stmt>& stmts) const {
    d.add(static_cast<uint64_t>(stmts.size()));
    for (const Stmt& s : stmts) {
      d.add(static_cast<uint64_t>(s.kind));
      d.add(Digester::pack(s.var, s.tensor));
      for (ExprId e : {s.a, s.b, s.c, s.d}) d.add(expr(e));
      if (s.kind == SKind::TmaLoad) d.add(expr(s.e));
      d.add(Digester::pack(s.width, s.axis));
      d.add(static_cast<uint64_t>(s.unroll) | static_cast<uint64_t>(s.transpose) << 1 |
            static_cast<uint64_t>(s.reduce) << 2 | static_cast<uint64_t>(s.mma_shape) << 10 |
            static_cast<uint64_t>(s.concurrent) << 18);
      d.add(Digester::pack(s.mma_operands[0], s.mma_operands[1]));
      d.add(Digester::pack(s.mma_operands[2], s.b_offset));
      d.add(Digester::pack(s.target, s.multicast));
      for (const WgmmaOperand& w : s.wgmma_operands) {
        d.add(Digester::pack(w.leading_bytes, w.stride_bytes));
        d.add(static_cast<uint64_t>(w.mn_major));
      }
      addStmts(d, s.body);
      addStmts(d, s.orelse);
    }
  }

 private:
  CodeDigest expr(ExprId id) const { return id < 0 ? CodeDigest{} : digests_[id]; }

  CodeDigest digestOf(const KExpr& e) const {
    Digester d;
    d.add(static_cast<uint64_t>(e.kind) | static_cast<uint64_t>(e.dtype) << 8 | static_cast<uint64_t>(e.index) << 16 |
          static_cast<uint64_t>(e.op) << 24 | static_cast<uint64_t>(e.from) << 40);
    d.add(static_cast<uint64_t>(e.i));
    d.add(std::bit_cast<uint64_t>(e.f));
    d.add(Digester::pack(e.ref, static_cast<int32_t>(e.args.size())));
    for (ExprId a : e.args) d.add(digests_[a]);
    return d.digest();
  }

  const Kernel& k_;
  std::vector<CodeDigest> digests_;  // per reached expression
};

}  // namespace

CodeDigest codeDigest(const Kernel& k) {
  Digester d;
  d.add(k.name);
  d.add(k.summary);
  d.add(Digester::pack(static_cast<int32_t>(k.block[0]), static_cast<int32_t>(k.block[1])));
  d.add(static_cast<uint64_t>(k.shared_bytes));
  d.add(static_cast<uint64_t>(k.cluster));
  d.add(static_cast<uint64_t>(k.warp_size));
  d.add(static_cast<uint64_t>(k.vectorize));
  d.add(static_cast<uint64_t>(k.index64) | static_cast<uint64_t>(k.arch_specific) << 1 |
        static_cast<uint64_t>(k.check_indices) << 2);
  d.add(k.index_errors ? static_cast<uint64_t>(*k.index_errors) : ~uint64_t{0});
  d.add(static_cast<uint64_t>(k.tensors.size()));
  for (size_t i = 0; i < k.tensors.size(); ++i) {
    const TensorParam& t = k.tensors[i];
    d.add(t.name);
    // Parameters over one buffer (an input updated in place) lose __restrict__: which share it matters,
    // not the buffer.
    size_t first_sharing = i;
    for (size_t j = 0; j < i && t.storage != nullptr; ++j) {
      if (k.tensors[j].storage == t.storage) {
        first_sharing = j;
        break;
      }
    }
    d.add(static_cast<uint64_t>(first_sharing));
    d.add(static_cast<uint64_t>(t.dtype) | static_cast<uint64_t>(t.output) << 16 |
          static_cast<uint64_t>(t.workspace) << 17 | static_cast<uint64_t>(t.zeroed) << 18 |
          static_cast<uint64_t>(t.shared) << 19 | static_cast<uint64_t>(t.index_errors) << 20 |
          static_cast<uint64_t>(t.tma.has_value()) << 21 | static_cast<uint64_t>(t.tma && t.tma->swizzle) << 22);
    if (t.tma) {
      // Each launch encodes the tensor map from the layout in the kernel IR: kernels of other maps are not
      // one (though their sources, which take the maps as parameters, may be).
      d.add(Digester::pack(static_cast<int32_t>(t.tma->box_rows), static_cast<int32_t>(t.tma->box_columns)));
      for (int64_t v : t.tma->map.sizes) d.add(static_cast<uint64_t>(v));
      for (int64_t v : t.tma->map.strides) d.add(static_cast<uint64_t>(v));
      d.add(static_cast<uint64_t>(t.tma->map.offset));
    }
  }
  d.add(static_cast<uint64_t>(k.arguments.size()));
  for (const ScalarArgument& a : k.arguments) {
    d.add(a.name);
    d.add(static_cast<uint64_t>(a.dtype) | static_cast<uint64_t>(a.index) << 16);
  }
  d.add(static_cast<uint64_t>(k.vars.size()));
  for (const KVar& v : k.vars) {
    d.add(v.name);
    d.add(static_cast<uint64_t>(v.dtype) | static_cast<uint64_t>(v.index) << 16 | static_cast<uint64_t>(v.kind) << 17 |
          static_cast<uint64_t>(v.storage) << 24);
    d.add(static_cast<uint64_t>(v.size));
    d.add(static_cast<uint64_t>(v.shared_offset));
  }
  KernelDigester(k).addStmts(d, k.body);
  return d.digest();
}

}  // namespace braze::kernel
