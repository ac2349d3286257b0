// ValSet: a set of one fusion's vals by id, as the schedulers' checks use it.
#include "ir/ops.h"
#include "ir/val_set.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TEST(ValSet, HoldsWhatWasInsertedOnce) {
  Fusion fusion;
  FusionGuard guard(&fusion);
  TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::Float);
  Val* y = add(x, x);
  Val* z = mul(y, x);
  ValSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.count(z), 0u);  // beyond every id seen: not held, not an error
  EXPECT_TRUE(set.insert(z));
  EXPECT_FALSE(set.insert(z));  // already there
  EXPECT_TRUE(set.insert(x));
  EXPECT_EQ(set.count(x), 1u);
  EXPECT_EQ(set.count(y), 0u);
  EXPECT_EQ(set.count(z), 1u);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_FALSE(set.empty());
}

TEST(ValSet, RefusesAValOfAnotherFusion) {
  Fusion a, b;
  TensorView* in_a = nullptr;
  TensorView* in_b = nullptr;
  {
    FusionGuard guard(&a);
    in_a = defineTensor({-1}, {true}, DataType::Float);
  }
  {
    FusionGuard guard(&b);
    in_b = defineTensor({-1}, {true}, DataType::Float);
  }
  ASSERT_EQ(in_a->id(), in_b->id());  // the same id, so only the owner tells them apart
  ValSet set;
  set.insert(in_a);
  EXPECT_THROW(set.count(in_b), Error);
  EXPECT_THROW(set.insert(in_b), Error);
}

}  // namespace
}  // namespace braze
