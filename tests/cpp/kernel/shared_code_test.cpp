// A kernel's code (expressions, vars, statements) is shared by its copies until one of them writes it
// (support/shared_vector.h): a copy reads the same elements, a write through one copy leaves the others
// as they were, and building on a copy (a KernelBuilder) changes only that copy.
#include "kernel/code_digest.h"
#include "kernel/kernel_ir.h"
#include "support/shared_vector.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using kernel::Kernel;
using kernel::KernelBuilder;

TEST(SharedVector, CopiesShareTheElementsUntilOneIsWritten) {
  SharedVector<int> a(std::vector<int>{1, 2, 3});
  SharedVector<int> b = a;
  EXPECT_EQ(&a.get(), &b.get());  // shared, not copied
  b.mut().push_back(4);
  EXPECT_NE(&a.get(), &b.get());
  EXPECT_EQ(a.get(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(b.get(), (std::vector<int>{1, 2, 3, 4}));
  // The only holder writes in place.
  const std::vector<int>* own = &b.get();
  b.mut()[0] = 7;
  EXPECT_EQ(&b.get(), own);
  EXPECT_EQ(b[0], 7);
  EXPECT_EQ(a[0], 1);
  // Moved from: empty, and usable again.
  SharedVector<int> c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT: a moved-from vector is empty, by this class's contract
  b.mut().push_back(5);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(c.size(), 4u);
  EXPECT_TRUE(SharedVector<int>().empty());
}

TEST(SharedVector, AKernelBuiltOnACopyLeavesTheOriginalsCode) {
  Kernel k;
  k.name = "k";
  {
    KernelBuilder kb(k);
    const kernel::VarId v = kb.scalarVar("v", DataType::Float);
    kb.let(v, kb.constant(1.0, DataType::Float));
  }
  const kernel::CodeDigest before = kernel::codeDigest(k);
  Kernel copy = k;
  EXPECT_EQ(&copy.body.get(), &k.body.get());
  EXPECT_EQ(kernel::codeDigest(copy), before);
  {
    KernelBuilder kb(copy);
    const kernel::VarId w = kb.scalarVar("w", DataType::Float);
    kb.let(w, kb.constant(2.0, DataType::Float));
  }
  EXPECT_EQ(k.body.size(), 1u);
  EXPECT_EQ(k.vars.size(), 1u);
  EXPECT_EQ(copy.body.size(), 2u);
  EXPECT_EQ(copy.vars.size(), 2u);
  EXPECT_EQ(kernel::codeDigest(k), before);
  EXPECT_NE(kernel::codeDigest(copy), before);
}

}  // namespace
}  // namespace braze
