// Alias analysis: which meta ops are views for a given layout, and their strides; and the
// per-tensor vectorization that bookending's cost model reads.
#include "ir/ops.h"
#include "passes/alias_analysis.h"
#include "ir/strided_layout.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// A reshape of a [sizes] input to new_shape, applied to `layout`.
ViewResult reshapeOf(const std::vector<int64_t>& sizes, const StridedLayout& layout, const std::vector<int64_t>& shape) {
  Fusion fusion;
  FusionGuard guard(&fusion);
  std::vector<int64_t> symbolic(sizes.size(), -1);
  std::vector<std::optional<bool>> contiguity(sizes.size(), false);
  TensorView* x = defineTensor(symbolic, contiguity, DataType::Float);
  std::vector<Val*> dims;
  for (int64_t s : shape) dims.push_back(fusion.constant(s));
  TensorView* y = reshape(x, dims);
  return viewThrough(*y->definition(), layout, shape);
}

TEST(AliasAnalysis, ReshapeOfContiguousDimsIsAView) {
  const auto r = reshapeOf({4, 6, 8}, StridedLayout::rowMajor({4, 6, 8}), {24, 8});
  EXPECT_TRUE(r.is_view);
  EXPECT_EQ(r.layout.strides, (std::vector<int64_t>{8, 1}));
  const auto split = reshapeOf({4, 6, 8}, StridedLayout::rowMajor({4, 6, 8}), {4, 3, 2, 2, 4});
  EXPECT_TRUE(split.is_view);
  EXPECT_EQ(split.layout.strides, (std::vector<int64_t>{48, 16, 8, 4, 1}));
}

TEST(AliasAnalysis, ReshapeMergingTransposedDimsIsNotAView) {
  // [4, 6] stored column-major: merging the two dims would need a copy.
  const auto r = reshapeOf({4, 6}, StridedLayout{{4, 6}, {1, 4}, 0}, {24});
  EXPECT_FALSE(r.is_view);
  EXPECT_NE(r.reason.find("not contiguous"), std::string::npos) << r.reason;
  // Splitting a strided dim is fine: only merges need contiguity.
  const auto split = reshapeOf({4, 6}, StridedLayout{{4, 6}, {1, 4}, 0}, {2, 2, 6});
  EXPECT_TRUE(split.is_view);
  EXPECT_EQ(split.layout.strides, (std::vector<int64_t>{2, 1, 4}));
}

TEST(AliasAnalysis, ReshapeAcrossAnExpandedOrSlicedDimIsNotAView) {
  EXPECT_FALSE(reshapeOf({4, 6}, StridedLayout{{4, 6}, {0, 1}, 0}, {24}).is_view);   // expanded outer dim
  EXPECT_FALSE(reshapeOf({4, 6}, StridedLayout{{4, 6}, {10, 1}, 3}, {24}).is_view);  // rows of a wider slice
  const auto keep = reshapeOf({4, 6}, StridedLayout{{4, 6}, {10, 1}, 3}, {4, 2, 3});
  EXPECT_TRUE(keep.is_view);
  EXPECT_EQ(keep.layout.strides, (std::vector<int64_t>{10, 3, 1}));
  EXPECT_EQ(keep.layout.offset, 3);
}

TEST(AliasAnalysis, SizeOneDimsNeverBreakAView) {
  const auto r = reshapeOf({4, 1, 6}, StridedLayout{{4, 1, 6}, {6, 999, 1}, 0}, {1, 24, 1});
  EXPECT_TRUE(r.is_view);
  EXPECT_EQ(r.layout.strides[1], 1);
}

TEST(AliasAnalysis, PermuteSliceExpandAndSqueezeAreViews) {
  Fusion fusion;
  FusionGuard guard(&fusion);
  TensorView* x = defineTensor({-1, 1, -1}, {true, std::nullopt, true}, DataType::Float);
  const StridedLayout in{{4, 1, 6}, {6, 6, 1}, 0};
  auto c = [&](int64_t v) -> Val* { return fusion.constant(v); };
  const auto p = viewThrough(*permute(x, {2, 0, 1})->definition(), in, {});
  EXPECT_EQ(p.layout.sizes, (std::vector<int64_t>{6, 4, 1}));
  EXPECT_EQ(p.layout.strides, (std::vector<int64_t>{1, 6, 6}));
  const auto e = viewThrough(*expand(x, {c(-1), c(5), c(-1)})->definition(), in, {-1, 5, -1});
  EXPECT_EQ(e.layout.strides, (std::vector<int64_t>{6, 0, 1}));
  const auto q = viewThrough(*squeeze(x, {1})->definition(), in, {});
  EXPECT_EQ(q.layout.sizes, (std::vector<int64_t>{4, 6}));
  const auto s = viewThrough(*slice(x, {c(1), c(0), c(2)}, {c(3), c(1), c(6)}, {c(1), c(1), c(2)})->definition(), in,
                             {1, 0, 2, 3, 1, 6, 1, 1, 2});
  EXPECT_EQ(s.layout.sizes, (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(s.layout.strides, (std::vector<int64_t>{6, 6, 2}));
  EXPECT_EQ(s.layout.offset, 8);
}

TEST(Vectorization, Bf16LayerNormRowsVectorizeBy8) {
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout::rowMajor({16, 128, 1600}), 16), 8);
}

TEST(Vectorization, ExpandedBroadcastNeverLowersTheFactor) {
  // The weight as {1 ex 16, 1 ex 128, 1600}: the case that dropped nvFuser's factor to 1.
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout{{16, 128, 1600}, {0, 0, 1}, 0}, 16), 8);
  // Broadcast along the vectorized dim: constant there, no limit at all.
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout{{16, 1600}, {1, 0}, 0}, 16), 8);
}

TEST(Vectorization, MisalignmentOddExtentsAndStridesLowerTheFactor) {
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout::rowMajor({16, 1600}), 4), 2);   // a pointer aligned to 4 bytes only
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout::rowMajor({16, 1600}), 2), 1);   // offset by 2 bytes
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout{{16, 1600}, {1600, 1}, 2}, 16), 2);
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout::rowMajor({16, 1601}), 16), 1);  // odd inner extent
  EXPECT_EQ(vectorizeFactor(DataType::BFloat16, StridedLayout{{16, 1600}, {1604, 1}, 0}, 16), 4);
  EXPECT_EQ(vectorizeFactor(DataType::Float, StridedLayout{{16, 1600}, {1, 16}, 0}, 16), 1);    // transposed
  EXPECT_EQ(vectorizeFactor(DataType::Float, StridedLayout::rowMajor({7, 12}), 16), 4);
}

}  // namespace
}  // namespace braze
