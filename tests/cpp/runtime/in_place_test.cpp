// In-place updates (outputs added with alias_input=) on a device: the pointwise kernels that write an
// elementwise update into its input themselves, the copy kernels that write the other new values, for
// every input layout a caller passes, against the reference evaluator; what is staged and saved so that reads of an updated input see the values from before the update;
// nvFuser's output convention; and inputs that cannot be updated. On the test device (the simulator, or
// the GPU under BRAZE_TEST_DEVICE=cuda).
#include "fusions/kernel_corpus.h"
#include "fusions/test_device.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "scheduler/copy_kernel.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// Runs `fusion` on the test device and returns its outputs, then its inputs as the run left them.
std::pair<std::vector<HostValue>, std::vector<HostValue>> runAndFetchInputs(const std::shared_ptr<Fusion>& fusion,
                                                                            const std::vector<HostValue>& inputs) {
  testing::TestDevice& device = testing::testDevice();
  auto cache = testing::testFusionCache(fusion, {});
  const testing::TestDevice::Placed placed = device.place(inputs);
  const std::vector<device::DeviceOutput> outputs = cache->run(placed.values, nullptr, /*wait=*/true);
  std::vector<HostValue> got, after;
  for (const device::DeviceOutput& out : outputs) got.emplace_back(device.fetch(out.tensor));
  for (const device::DeviceValue& v : placed.values) {
    if (const auto* t = std::get_if<device::DeviceTensor>(&v)) after.emplace_back(device.fetch(*t));
  }
  return {got, after};
}

std::vector<HostValue> tensorsOf(const std::vector<HostValue>& values) {
  std::vector<HostValue> tensors;
  for (const HostValue& v : values) {
    if (std::holds_alternative<HostTensor>(v)) tensors.push_back(std::get<HostTensor>(v).contiguous());
  }
  return tensors;
}

// x <- x * 2 + y, with x also read by another output (x * 3) and viewed by one (x^T, which shows x from
// before the update), for x in `layout`: each layout a copy kernel must write through.
struct Layout {
  const char* name;
  DataType dtype;
  std::vector<int64_t> sizes;
  std::function<HostTensor(const HostTensor& base)> view;  // x from a row-major tensor of 2 * numel + 8
};

class InPlaceLayouts : public ::testing::TestWithParam<Layout> {};

// x <- x * 2 + y, added again as a plain output (the updated x itself); with `readers`, x * 3 and x^T
// are outputs too.
std::shared_ptr<Fusion> doubleAndAdd(DataType dtype, bool readers) {
  auto f = std::make_shared<Fusion>();
  FusionGuard g(f.get());
  TensorView* x = defineTensor({-1, -1}, {false, false}, dtype);
  TensorView* y = defineTensor({-1, -1}, {true, true}, dtype);
  Val* updated = cast(add(mul(x, f->constant(2.0)), y), dtype);
  if (readers) {
    f->addOutput(cast(mul(x, f->constant(3.0)), dtype));
    f->addOutput(permute(x, {1, 0}));
  }
  f->aliasOutputToInput(updated, x);
  f->addOutput(updated);
  return f;
}

// doubleAndAdd's fusion on x (a view of `base` with the layout) and y, and what the reference makes of
// them: its outputs, and its own copy of the inputs after the update.
struct LayoutRun {
  std::shared_ptr<Fusion> fusion;
  HostTensor base, y;
  std::vector<HostValue> theirs, want;
};
LayoutRun layoutRun(const Layout& layout, bool readers, uint64_t seed) {
  LayoutRun r;
  r.fusion = doubleAndAdd(layout.dtype, readers);
  const int64_t numel = layout.sizes[0] * layout.sizes[1];
  r.base = testing::randomTensor(layout.dtype, {2 * numel + 8}, seed);
  r.y = testing::randomTensor(layout.dtype, layout.sizes, seed + 1);
  r.theirs = {layout.view(r.base.contiguous()), r.y};
  r.want = evaluate(*r.fusion, r.theirs);
  return r;
}

TEST_P(InPlaceLayouts, UpdatesTheInputLikeTheReference) {
  const Layout& layout = GetParam();
  const LayoutRun r = layoutRun(layout, /*readers=*/true, 3);
  const auto [got, after] = runAndFetchInputs(r.fusion, {layout.view(r.base), r.y});
  ASSERT_EQ(got.size(), 3u);
  testing::expectSameValues(got, tensorsOf(r.want));
  testing::expectSameValues(after, tensorsOf(r.theirs));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, InPlaceLayouts,
    ::testing::Values(
        Layout{"contiguous", DataType::Float, {6, 40}, [](const HostTensor& b) { return b.view({6, 40}, {40, 1}, 0); }},
        Layout{"misaligned", DataType::Float, {6, 40}, [](const HostTensor& b) { return b.view({6, 40}, {40, 1}, 1); }},
        Layout{"rows_with_gaps", DataType::Float, {5, 7}, [](const HostTensor& b) { return b.view({5, 7}, {9, 1}, 2); }},
        Layout{"column_major", DataType::Float, {5, 7}, [](const HostTensor& b) { return b.view({5, 7}, {1, 5}, 0); }},
        Layout{"reversed", DataType::Float, {5, 7}, [](const HostTensor& b) { return b.view({5, 7}, {-7, -1}, 34); }},
        Layout{"size_1_rows", DataType::Float, {1, 33}, [](const HostTensor& b) { return b.view({1, 33}, {1, 1}, 0); }},
        Layout{"bf16_odd", DataType::BFloat16, {3, 130}, [](const HostTensor& b) { return b.view({3, 130}, {130, 1}, 3); }},
        Layout{"half_empty", DataType::Half, {0, 4}, [](const HostTensor& b) { return b.view({0, 4}, {4, 1}, 0); }}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

TEST(InPlace, InputsThatSwapValuesAreStagedFirst) {
  // a <- b and b <- a: each new value is the other input itself, so both are copied out before either is
  // written (written in turn, the second would read the first's new value).
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->aliasOutputToInput(b, a);
    f->aliasOutputToInput(a, b);
  }
  const HostTensor a = testing::randomTensor(DataType::Float, {4, 9}, 1), b = testing::randomTensor(DataType::Float, {4, 9}, 2);
  const auto [got, after] = runAndFetchInputs(f, {a, b});
  EXPECT_TRUE(got.empty());
  testing::expectSameValues(after, {b, a});
  const LoweredPlan lowered = lowerPlan(planSegments(*f, {a, b}), DeviceInfo::h100Sxm());
  ASSERT_EQ(lowered.copies.size(), 4u);
  EXPECT_EQ(lowered.copies[0].target, InPlaceCopy::Target::Staged);
  EXPECT_EQ(lowered.copies[1].target, InPlaceCopy::Target::Staged);
  EXPECT_EQ(lowered.copies[2].staged, 0);
  EXPECT_EQ(lowered.copies[3].staged, 1);
}

// x <- x * 2 + y alone: the pointwise kernel reads each element of x where it writes its new value, so
// it writes x itself, through x's layout, and no copy follows.
TEST_P(InPlaceLayouts, AnElementwiseUpdateIsWrittenByItsKernel) {
  const Layout& layout = GetParam();
  const LayoutRun r = layoutRun(layout, /*readers=*/false, 5);
  const LoweredPlan lowered = lowerPlan(planSegments(*r.fusion, {layout.view(r.base), r.y}), DeviceInfo::h100Sxm());
  // A column-major x next to a row-major y is the transpose scheduler's (tiles staged through shared
  // memory, read and written by different threads): that update stays a copy.
  const bool transposed = std::string(layout.name) == "column_major";
  EXPECT_EQ(lowered.plan.written_in_place.size(), transposed ? 0u : 1u) << lowered.plan.toString();
  EXPECT_EQ(lowered.copies.size(), transposed ? 1u : 0u);
  const auto [got, after] = runAndFetchInputs(r.fusion, {layout.view(r.base), r.y});
  ASSERT_EQ(got.size(), 1u);
  testing::expectSameValues(got, tensorsOf(r.want));
  testing::expectSameValues(after, tensorsOf(r.theirs));
}

TEST(InPlace, UpdatesReadElsewhereOrAcrossElementsStayCopies) {
  // x <- x - max(x) per row reads every element of x for each new one (a reduction), and x <- x + 1 next to
  // an output reading x transposed: neither kernel may write x while another thread may still read it.
  auto centered = std::make_shared<Fusion>();
  auto transposed = std::make_shared<Fusion>();
  {
    FusionGuard g(centered.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    centered->aliasOutputToInput(sub(x, reduce(OpKind::Max, x, {1}, /*keepdim=*/true)), x);
  }
  {
    FusionGuard g(transposed.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    transposed->aliasOutputToInput(add(x, transposed->constant(1.0)), x);
    transposed->addOutput(add(permute(x, {1, 0}), transposed->constant(2.0)));
  }
  for (const auto& f : {centered, transposed}) {
    const HostTensor x = testing::randomTensor(DataType::Float, {7, 7}, 8);
    const LoweredPlan lowered = lowerPlan(planSegments(*f, {x}), DeviceInfo::h100Sxm());
    EXPECT_TRUE(lowered.plan.written_in_place.empty()) << lowered.plan.toString();
    EXPECT_EQ(lowered.copies.size(), 1u);
    const HostTensor theirs = testing::randomTensor(DataType::Float, {7, 7}, 8);  // the reference updates it
    const std::vector<HostValue> want = evaluate(*f, {theirs});
    const auto [got, after] = runAndFetchInputs(f, {x});
    testing::expectSameValues(got, tensorsOf(want));
    testing::expectSameValues(after, {theirs});
  }
}

TEST(InPlace, AnInputSharingMemoryWithOneAKernelWritesIsRefusedByName) {
  // p <- p - 0.1 * g: with g one element past p in the same buffer, the kernel would read elements of g
  // another thread already wrote; the same tensor passed as both reads each element where it writes it.
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* p = defineTensor({-1}, {true}, DataType::Float);
    TensorView* grad = defineTensor({-1}, {true}, DataType::Float);
    f->aliasOutputToInput(sub(p, mul(grad, f->constant(0.1))), p);
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const auto p = device::DeviceTensor::contiguous(0x100000, DataType::Float, {4096});
  const auto shifted = device::DeviceTensor::contiguous(0x100004, DataType::Float, {4096});
  try {
    cache.run({p, shifted});
    ADD_FAILURE() << "overlapping inputs were run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 (T1) lies in the memory range of input 0 (T0)"), std::string::npos)
        << e.what();
  }
  cache.run({p, p});
  cache.run({p, device::DeviceTensor::contiguous(0x104000, DataType::Float, {4096})});  // just past p
  EXPECT_EQ(ops.launches.load(), 2);
  // The same tensor twice, on the test device: p <- p - 0.1 * p.
  const HostTensor x = testing::randomTensor(DataType::Float, {300}, 9);
  const HostTensor theirs = testing::randomTensor(DataType::Float, {300}, 9);
  evaluate(*f, {theirs, theirs.contiguous()});
  const auto [got, after] = runAndFetchInputs(f, {x, x});
  testing::expectSameValues({after[0]}, {theirs});
}

TEST(InPlace, AnOptimizerStepIsOneKernelAndTheSameValueReturnsTheInput) {
  // What an optimizer step is: p <- p - lr * g in one kernel that writes p itself. The value added
  // again as a plain output comes back as p itself, as nvFuser returns it.
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* p = defineTensor({-1}, {true}, DataType::Float);
    TensorView* grad = defineTensor({-1}, {true}, DataType::Float);
    Val* stepped = sub(p, mul(grad, f->constant(0.1)));
    f->aliasOutputToInput(stepped, p);
    f->addOutput(stepped);
  }
  const std::vector<HostValue> inputs{testing::randomTensor(DataType::Float, {4096}, 1),
                                      testing::randomTensor(DataType::Float, {4096}, 2)};
  const LoweredPlan lowered = lowerPlan(planSegments(*f, inputs), DeviceInfo::h100Sxm());
  EXPECT_TRUE(lowered.copies.empty());
  ASSERT_EQ(lowered.plan.written_in_place.size(), 1u);
  EXPECT_EQ(lowered.plan.written_in_place.begin()->second->name(), f->inputs()[0]->name());
  // Kernels run on the reference write no inputs: the update is then a copy.
  PlanOptions on_reference;
  on_reference.kernels_on_reference = true;
  EXPECT_EQ(lowerPlan(planSegments(*f, inputs, on_reference), DeviceInfo::h100Sxm()).copies.size(), 1u);
  // A device without host memory runs it too: one kernel, nothing on the host.
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const auto outputs = cache.run({device::DeviceTensor::contiguous(0x100000, DataType::Float, {4096}),
                                  device::DeviceTensor::contiguous(0x200000, DataType::Float, {4096})});
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].alias_of, 0);
  EXPECT_EQ(outputs[0].tensor.data, 0x100000u);
  EXPECT_EQ(ops.launches.load(), 1);
  ASSERT_EQ(cache.lastPlan()->launchedKernels().size(), 1u);
}

TEST(InPlace, CopyKernelsVectorizeWhereBothLayoutsAllow) {
  const auto contiguous = [](std::vector<int64_t> sizes, int64_t alignment) {
    return InputLayout{StridedLayout::rowMajor(std::move(sizes)), alignment};
  };
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const kernel::Kernel fast = scheduler::lowerCopyKernel("copy", DataType::BFloat16, contiguous({64, 1024}, 16),
                                                        contiguous({64, 1024}, 16), h100);
  EXPECT_EQ(fast.vectorize, 8) << fast.summary;
  if (device::nvrtcAvailable()) {
    const device::CompiledKernel compiled = device::compileCuda(codegen::emitCuda(fast), fast.name, {.arch = "sm_90"});
    EXPECT_EQ(compiled.log, "");
    if (const std::optional<std::string> sass = device::disassemble(compiled.cubin)) {
      const device::GlobalAccessCounts accesses = device::countGlobalAccesses(*sass);
      EXPECT_EQ(accesses.load_bits, (std::map<int, int>{{128, 1}})) << *sass;
      EXPECT_EQ(accesses.store_bits, (std::map<int, int>{{128, 1}})) << *sass;
    }
  }
  // Columns written with a stride: the loads stay vectors, the stores are one per element.
  const InputLayout columns{StridedLayout{{64, 1024}, {1, 64}, 0}, 16};
  const kernel::Kernel strided = scheduler::lowerCopyKernel("copy", DataType::BFloat16, contiguous({64, 1024}, 16),
                                                           columns, h100);
  EXPECT_EQ(strided.tensors.size(), 2u);
  EXPECT_TRUE(strided.tensors[1].output);
  EXPECT_EQ(strided.tensors[1].layout.strides, (std::vector<int64_t>{1, 64}));
}

TEST(InPlace, AnExpandedInputCannotBeUpdated) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {std::nullopt, true}, DataType::Float);
    f->aliasOutputToInput(add(x, f->constant(1.0)), x);
  }
  const HostTensor row = testing::randomTensor(DataType::Float, {8}, 1);
  const HostTensor expanded = row.view({4, 8}, {0, 1}, 0);
  try {
    planAndLower(*f, {expanded}, {});
    FAIL() << "an expanded input was updated in place";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input T0 is updated in place"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dim 0 is expanded (size 4, stride 0)"), std::string::npos) << e.what();
  }
}

TEST(InPlace, ANewValueOfAnotherShapeIsRefused) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* y = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->aliasOutputToInput(add(x, y), x);
  }
  EXPECT_THROW(planAndLower(*f, {testing::randomTensor(DataType::Float, {1, 8}, 1),
                                 testing::randomTensor(DataType::Float, {3, 8}, 2)}, {}),
               Error);
}

}  // namespace
}  // namespace braze
