// Index arithmetic folded with the range of each index value (KernelBuilder::bounds): comparisons that
// always hold, / and % of values below the divisor, and an index unflattened, shifted inside its dim
// and flattened again. What may not fold (launch arguments, values that can be negative) stays.
// End to end, the RoPE kernel's cat over a whole head dim reads without a bounds test.
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "kernel/kernel_ir.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;
using namespace codegen;

TEST(IndexBounds, ThreadAndLoopIndicesHaveRanges) {
  Kernel k;
  KernelBuilder kb(k);
  const ExprId tid = kb.threadIdx(0);
  EXPECT_EQ(kb.lt(kb.mod(tid, kb.index(128)), kb.index(128)), kb.boolean(true));
  EXPECT_EQ(kb.le(kb.index(0), kb.mod(tid, kb.index(128))), kb.boolean(true));
  EXPECT_EQ(kb.mod(kb.mod(tid, kb.index(64)), kb.index(128)), kb.mod(tid, kb.index(64)));
  EXPECT_EQ(kb.div(kb.mod(tid, kb.index(64)), kb.index(64)), kb.index(0));
  const VarId c = kb.scalarVar("c", DataType::Int64, true);
  kb.openFor(c, kb.index(0), kb.index(4), kb.index(1), true);
  EXPECT_EQ(kb.lt(kb.ref(c), kb.index(4)), kb.boolean(true));
  EXPECT_EQ(kb.expr(kb.lt(kb.ref(c), kb.index(3))).kind, EKind::Lt);  // c = 3 fails it
  kb.close();
  // A launch argument has no range: the test against it stays, whatever its value at planning.
  const ExprId rows = kb.extent("rows", 7);
  EXPECT_NE(kb.lt(tid, rows), kb.boolean(true));
  EXPECT_NE(kb.lt(tid, rows), kb.boolean(false));
  EXPECT_FALSE(kb.bounds(rows).has_value());
}

TEST(IndexBounds, AFixedBlockGivesThreadIndicesItsRange) {
  Kernel k;
  KernelBuilder kb(k);
  kb.fixBlock(128, 2);
  EXPECT_EQ(k.block, (std::array<int64_t, 2>{128, 2}));
  // A row of 3 chunks of 8 per thread over 128 threads: (c * 128 + tid) * 8 < 3072 always holds.
  const VarId c = kb.scalarVar("c", DataType::Int64, true);
  kb.openFor(c, kb.index(0), kb.index(3), kb.index(1), true);
  const ExprId col = kb.mul(kb.add(kb.mul(kb.ref(c), kb.index(128)), kb.threadIdx(0)), kb.index(8));
  EXPECT_EQ(kb.lt(col, kb.index(3072)), kb.boolean(true));
  EXPECT_NE(kb.lt(col, kb.index(3064)), kb.boolean(true));  // the last thread's last chunk starts at 3064
  kb.close();
  EXPECT_EQ(kb.lt(kb.threadIdx(1), kb.index(2)), kb.boolean(true));
  EXPECT_NE(kb.lt(kb.threadIdx(1), kb.index(1)), kb.boolean(true));
}

TEST(IndexBounds, BitwiseAndOfNonNegativeIndicesStaysUnderEither) {
  Kernel k;
  KernelBuilder kb(k);
  kb.fixBlock(512, 1);
  const ExprId low = kb.bitAnd(kb.threadIdx(0), kb.index(63));
  const auto b = kb.bounds(low);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->lo, 0);
  EXPECT_EQ(b->hi, 63);
  EXPECT_EQ(kb.bitAnd(kb.index(0b1101), kb.index(0b0110)), kb.index(0b0100));
  EXPECT_EQ(kb.bitAnd(kb.threadIdx(0), kb.index(0)), kb.index(0));
  EXPECT_EQ(kb.expr(low).kind, EKind::BitAnd);
}

TEST(IndexBounds, AnIndexShiftedInsideItsDimFlattensBack) {
  Kernel k;
  KernelBuilder kb(k);
  // chunk >= 0 (a let of thread and block indices); L = chunk * 8 over [.., 128] rows.
  const ExprId chunk = kb.letValue("chunk", kb.add(kb.mul(kb.blockIdx(0), kb.index(128)), kb.threadIdx(0)));
  const ExprId l = kb.mul(chunk, kb.index(8));
  const ExprId col = kb.mod(l, kb.index(128));
  const ExprId row_start = kb.mul(kb.div(l, kb.index(128)), kb.index(128));
  // cat's second half: (col < 64 ? col : 0) + 64 is in [64, 128): the row survives, and so does the column.
  const ExprId inside = kb.select(kb.lt(col, kb.index(64)), col, kb.index(0));
  const ExprId shifted = kb.add(row_start, kb.add(inside, kb.index(64)));
  EXPECT_EQ(kb.div(shifted, kb.index(128)), kb.div(chunk, kb.index(16)));
  EXPECT_EQ(kb.mod(shifted, kb.index(128)), kb.add(inside, kb.index(64)));
  // A divisor that the multiple does not reach: (row_start + 70) / 1024 = row_start / 1024 = chunk / 128.
  EXPECT_EQ(kb.div(kb.add(row_start, kb.index(70)), kb.index(1024)), kb.div(chunk, kb.index(128)));
  const auto b = kb.bounds(inside);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->lo, 0);
  EXPECT_EQ(b->hi, 63);
}

TEST(IndexBounds, ValuesThatMayBeNegativeAreNotFolded) {
  Kernel k;
  KernelBuilder kb(k);
  const ExprId rel = kb.sub(kb.mod(kb.threadIdx(0), kb.index(8)), kb.index(4));  // in [-4, 3]
  const ExprId m = kb.mod(rel, kb.index(8));
  EXPECT_EQ(kb.expr(m).kind, EKind::Mod);  // C's % of a negative value is negative: not rel % 8 == rel
  const ExprId d = kb.div(rel, kb.index(8));
  EXPECT_EQ(kb.expr(d).kind, EKind::Div);
  EXPECT_NE(kb.le(kb.index(0), rel), kb.boolean(true));
}

TEST(IndexBounds, RopeReadsAWholeHeadDimWithoutABoundsTest) {
  const testing::KernelCase c =
      testing::ropeCase({.batch = 1, .seq = 6, .heads = 4, .groups = 2, .head = 16, .rope_n_elem = 16}, 3);
  const auto compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  for (const auto& k : compiled.kernels) {
    if (!k) continue;
    const std::string full = emitCuda(*k), source = full.substr(full.find("__global__"));
    // rope_n_elem = head: cat([roped, t[..., 16:]]) has an empty second piece, so its first piece spans
    // the dim and needs no `0 <= i && i < 16` test; only rotate-half's choice of x1 or -x2 remains.
    EXPECT_EQ(source.find("< 16)"), std::string::npos) << source;
    EXPECT_NE(source.find("- 8)) ?"), std::string::npos) << source;
  }
}

}  // namespace
}  // namespace braze
