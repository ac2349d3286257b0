// ThreadScratch: one value per thread, the same from call to call (its vectors' capacity kept); a call
// entered again while an outer one holds it gets a value of its own; another thread has its own.
#include "support/thread_scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace braze {
namespace {

using Words = std::vector<int>;

// The address of the value one call held (as an integer: the value outlives the call, being the
// thread's, though the compiler cannot tell).
uintptr_t heldByOneCall(size_t fill) {
  ThreadScratch<Words> scratch;
  scratch.get().assign(fill, 7);
  return reinterpret_cast<uintptr_t>(&scratch.get());
}

TEST(ThreadScratch, CallsOnOneThreadReuseOneValue) {
  const uintptr_t first = heldByOneCall(100);
  EXPECT_EQ(heldByOneCall(3), first);
  ThreadScratch<Words> next;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&next.get()), first);
  EXPECT_GE(next.get().capacity(), 100u);  // what the first call grew is there for the next
}

TEST(ThreadScratch, ACallEnteredAgainGetsItsOwn) {
  ThreadScratch<Words> outer;
  outer.get().assign(4, 1);
  Words* inner = nullptr;
  {
    ThreadScratch<Words> again;
    inner = &again.get();
    EXPECT_TRUE(inner->empty());
    again.get().assign(9, 2);
  }
  EXPECT_NE(inner, &outer.get());
  EXPECT_EQ(outer.get(), Words(4, 1));  // untouched by the inner call
  {
    ThreadScratch<Words> again;  // still inside the outer call: its own again
    EXPECT_NE(&again.get(), &outer.get());
  }
}

TEST(ThreadScratch, AfterTheOuterCallTheReusedValueIsFreeAgain) {
  Words* reused = nullptr;
  {
    ThreadScratch<Words> outer;
    reused = &outer.get();
    ThreadScratch<Words> inner;
    EXPECT_NE(&inner.get(), reused);
  }
  ThreadScratch<Words> next;
  EXPECT_EQ(&next.get(), reused);
}

TEST(ThreadScratch, AnotherThreadHasItsOwn) {
  const uintptr_t here = heldByOneCall(1);
  uintptr_t there = 0;
  std::thread([&] { there = heldByOneCall(1); }).join();
  EXPECT_NE(here, there);
}

}  // namespace
}  // namespace braze
