// The reduction domain's dim helpers: the comparison that makes no lists agrees with the one that does,
// and a reduction's dims are its attribute itself where the builders left them ascending.
#include "ir/ops.h"
#include "scheduler/reduction/reduction_domain.h"

#include <gtest/gtest.h>

#include <random>

namespace braze {
namespace {

TEST(ReductionDomain, SameDimsBeyondOnesAgreesWithComparingTheLists) {
  std::mt19937 rng(7);
  const auto list = [&](size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    return v;
  };
  int differing = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const auto size = [&] { return std::uniform_int_distribution<size_t>(0, 4)(rng); };
    // Sizes of 1 often, dims out of range at times (both compared as dimsBeyondOnes keeps them).
    const std::vector<int64_t> sizes_a = list(size(), 1, 2), sizes_b = list(size(), 1, 2);
    const std::vector<int64_t> a = list(size(), -1, 4), b = list(size(), -1, 4);
    const bool same = dimsBeyondOnes(a, sizes_a) == dimsBeyondOnes(b, sizes_b);
    differing += same ? 0 : 1;
    EXPECT_EQ(sameDimsBeyondOnes(a, sizes_a, b, sizes_b), same) << trial;
  }
  EXPECT_GT(differing, 100);
  EXPECT_LT(differing, 4900);  // both answers drawn often
}

TEST(ReductionDomain, AscendingDimsAreTheAttributeWhereItIsAscending) {
  Fusion fusion;
  FusionGuard guard(&fusion);
  TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
  const Expr* r = reduce(OpKind::Sum, x, {2, 0})->definition();  // the builder sorts: [0, 2]
  std::vector<int64_t> storage;
  const std::vector<int64_t>& dims = ascendingDims(*r, storage);
  EXPECT_NE(&dims, &storage);  // the attribute itself, not a copy
  EXPECT_EQ(dims, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(storage.empty());
  // An attribute not ascending (an expr made without the builder): a sorted copy, each dim once.
  TensorView* out = fusion.newTensor(DataType::Float, {IterDomain{-1, IterType::Iteration}});
  const Expr* unsorted = fusion.newExpr(OpKind::Sum, {x}, {out}, Attributes{{"dims", std::vector<int64_t>{2, 0, 2}}});
  const std::vector<int64_t>& sorted = ascendingDims(*unsorted, storage);
  EXPECT_EQ(&sorted, &storage);
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 2}));
}

}  // namespace
}  // namespace braze
