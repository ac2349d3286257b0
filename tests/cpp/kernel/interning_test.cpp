// KernelBuilder's interning: an expression built twice is one id, however many operands it has and
// however large the kernel grows (the intern table rehashes as it fills), and an expression's operand
// list (ExprArgs) behaves as a vector on both sides of its four inline slots.
#include "kernel/kernel_ir.h"

#include <gtest/gtest.h>

#include <vector>

namespace braze {
namespace {

using namespace kernel;

TEST(ExprArgs, BehavesAsAVectorInlineAndOnTheHeap) {
  for (size_t count : {0u, 1u, 3u, 4u, 5u, 9u}) {
    SCOPED_TRACE(count);
    std::vector<ExprId> ids;
    ExprArgs args;
    for (size_t i = 0; i < count; ++i) {
      ids.push_back(static_cast<ExprId>(10 * i + 7));
      args.push_back(ids.back());
    }
    ASSERT_EQ(args.size(), count);
    EXPECT_EQ(args.empty(), count == 0);
    EXPECT_EQ(std::vector<ExprId>(args.begin(), args.end()), ids);
    EXPECT_TRUE(args == ExprArgs(ids));

    ExprArgs copy = args;
    EXPECT_TRUE(copy == args);
    if (count > 0) {
      copy[count - 1] = -1;  // a copy owns its operands
      EXPECT_EQ(args[count - 1], ids.back());
      EXPECT_FALSE(copy == args);
    }
    ExprArgs moved = std::move(copy);
    EXPECT_EQ(moved.size(), count);
    ExprArgs assigned{1, 2};
    assigned = args;
    EXPECT_TRUE(assigned == args);
    assigned = ExprArgs{3};
    EXPECT_EQ(std::vector<ExprId>(assigned.begin(), assigned.end()), std::vector<ExprId>{3});
  }
}

TEST(KernelBuilder, InternsEqualExpressionsOfAnyOperandCountOnce) {
  Kernel k;
  KernelBuilder kb(k);
  const ExprId a = kb.threadIdx(0);
  const ExprId b = kb.blockIdx(0);
  // Thousands of distinct index expressions: the table grows several times, and each is found again.
  std::vector<ExprId> made;
  for (int64_t i = 0; i < 3000; ++i) made.push_back(kb.add(kb.mul(a, kb.index(i + 2)), b));
  const size_t size = k.exprs.size();
  for (int64_t i = 0; i < 3000; ++i) EXPECT_EQ(kb.add(kb.mul(a, kb.index(i + 2)), b), made[i]);
  EXPECT_EQ(k.exprs.size(), size);
  // An elementwise op with more operands than ExprArgs keeps inline, and one that differs in the last.
  std::vector<ExprId> operands;
  for (int64_t i = 0; i < 6; ++i) operands.push_back(kb.cast(kb.add(a, kb.index(i)), DataType::Float));
  const ExprId wide = kb.elementwise(OpKind::Add, DataType::Float, operands);
  EXPECT_EQ(kb.elementwise(OpKind::Add, DataType::Float, operands), wide);
  EXPECT_EQ(k.exprs[wide].args.size(), 6u);
  operands.back() = operands.front();
  EXPECT_NE(kb.elementwise(OpKind::Add, DataType::Float, operands), wide);
}

}  // namespace
}  // namespace braze
