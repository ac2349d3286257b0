// The verifiers catch what they promise to: a kernel that writes its input, names two parameters alike,
// reads a scalar outside the loop that defines it, or accesses a vector wider than 16 bytes; a plan whose
// segments are out of dependency order. (Every plan and kernel the other tests make passes through them: BRAZE_VERIFY=1.)
#include "exec/pipeline.h"
#include "fusions/kernel_corpus.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "segmenter/verify_plan.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

// A copy kernel of n floats; `mutate` changes it before verification.
Kernel copyKernel(const std::function<void(KernelBuilder&, TensorId in, TensorId out)>& body) {
  Kernel k;
  k.name = "copy";
  k.block = {32, 1};
  KernelBuilder kb(k);
  TensorParam in;
  in.name = "T0";
  in.layout = StridedLayout{{32}, {1}, 0};
  TensorParam out = in;
  out.name = "T1";
  out.output = true;
  const TensorId tin = kb.addTensor(in), tout = kb.addTensor(out);
  body(kb, tin, tout);
  return k;
}

std::string failureOf(const Kernel& k) {
  try {
    verifyKernel(k);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    return e.what();
  }
  return "";
}

TEST(KernelVerifier, AcceptsAWellFormedKernel) {
  const Kernel k = copyKernel([](KernelBuilder& kb, TensorId in, TensorId out) {
    kb.store(out, kb.threadIdx(0), kb.load(in, kb.threadIdx(0)));
  });
  EXPECT_EQ(failureOf(k), "");
  EXPECT_NE(printKernel(k).find("T1[threadIdx.x] = T0[threadIdx.x]"), std::string::npos) << printKernel(k);
}

TEST(KernelVerifier, RejectsAStoreToAnInput) {
  const Kernel k = copyKernel([](KernelBuilder& kb, TensorId in, TensorId) {
    kb.store(in, kb.threadIdx(0), kb.constant(1.0, DataType::Float));
  });
  EXPECT_NE(failureOf(k).find("writes T0, an input of the kernel"), std::string::npos) << failureOf(k);
}

// A shared vector load (SKind::SharedVecLoad) reads a shared array held as stored, at a multiple of its
// width, into a local array of the same dtype that holds it.
TEST(KernelVerifier, RejectsASharedVectorLoadThatIsMisalignedOrMistyped) {
  auto kernelWith = [](int64_t from, DataType to, int64_t at) {
    return copyKernel([&](KernelBuilder& kb, TensorId, TensorId out) {
      const VarId shared = kb.sharedStorageArray("stage", DataType::BFloat16, 64);
      kb.declare(shared);
      const VarId local = kb.arrayVar("sv", to, 8);
      kb.declare(local);
      kb.sharedVecLoad(local, kb.index(at), shared, kb.index(from), 8);
      kb.store(out, kb.threadIdx(0), kb.cast(kb.localRead(local, kb.index(0)), DataType::Float));
    });
  };
  EXPECT_EQ(failureOf(kernelWith(16, DataType::BFloat16, 0)), "");
  EXPECT_NE(printKernel(kernelWith(16, DataType::BFloat16, 0)).find("vector_load<8>(stage[16])"), std::string::npos);
  EXPECT_NE(failureOf(kernelWith(12, DataType::BFloat16, 0)).find("not a 1-16 byte power of two at a multiple of it"),
            std::string::npos);
  EXPECT_NE(failureOf(kernelWith(16, DataType::Float, 0)).find("of the shared array's dtype"), std::string::npos);
  EXPECT_NE(failureOf(kernelWith(16, DataType::BFloat16, 4)).find("at sv[4] past its end"), std::string::npos);
  EXPECT_NE(failureOf(kernelWith(64, DataType::BFloat16, 0)).find("at stage[64] past its end"), std::string::npos);
}

TEST(KernelVerifier, RejectsTwoParametersOfOneName) {
  Kernel k = copyKernel([](KernelBuilder& kb, TensorId in, TensorId out) {
    kb.store(out, kb.threadIdx(0), kb.load(in, kb.threadIdx(0)));
  });
  k.tensors[1].name = "T0";  // the compiler would say "duplicate parameter name"
  EXPECT_NE(failureOf(k).find("two parameters named T0"), std::string::npos) << failureOf(k);
}

TEST(KernelVerifier, RejectsALoopVariableReadAfterItsLoop) {
  const Kernel k = copyKernel([](KernelBuilder& kb, TensorId in, TensorId out) {
    const VarId i = kb.scalarVar("i", DataType::Int64, true);
    kb.openFor(i, kb.index(0), kb.index(4), kb.index(1), false);
    kb.close();
    kb.store(out, kb.ref(i), kb.load(in, kb.ref(i)));
  });
  EXPECT_NE(failureOf(k).find("a store reads i0 where it is not defined"), std::string::npos) << failureOf(k) << printKernel(k);
}

TEST(KernelVerifier, RejectsVectorsWiderThan16Bytes) {
  const Kernel k = copyKernel([](KernelBuilder& kb, TensorId in, TensorId out) {
    const VarId v = kb.arrayVar("v", DataType::Float, 8);
    kb.declare(v);
    kb.vecLoad(v, kb.index(0), in, kb.index(0), 8);
    kb.vecStore(out, kb.index(0), v, kb.index(0), 8);
  });
  EXPECT_NE(failureOf(k).find("is not a 1-16 byte power of two"), std::string::npos) << failureOf(k);
}

TEST(PlanVerifier, RejectsSegmentsOutOfDependencyOrder) {
  // x minus its column sums, then row sums: two kernel segments, the second reading the first.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* centered = sub(x, broadcast(reduce(OpKind::Sum, x, {0}), {true, false}))->asTensor();
    f.addOutput(reduce(OpKind::Sum, mul(centered, centered)->asTensor(), {1}));
  }
  SegmentedFusion plan = planSegments(f, testing::randomInputs(f, 1, {{8, 16}}));
  ASSERT_EQ(plan.segments.size(), 2u) << plan.toString();
  verifyPlan(plan);
  std::swap(plan.segments[0], plan.segments[1]);
  try {
    verifyPlan(plan);
    FAIL() << "a plan whose second segment runs first passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("before any earlier segment writes it"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
