// CPU scalar inputs (0-d define_tensor(is_cpu=True), what Thunder and nvFuser pass for a learning rate
// or a scale as a torch CPU tensor) next to device tensors: kernels take the value as a launch argument
// read from host memory on each run, never the host address, whichever scheduler reads it and through
// whatever view (broadcast, expand, reshape). On the test device (the simulator, or the GPU under
// BRAZE_TEST_DEVICE=cuda), against the reference evaluator.
#include "fusions/kernel_corpus.h"
#include "fusions/test_device.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// The test device's inputs, with the CPU scalars (`cpu[i]`) left in host memory as device -1.
struct PlacedWithScalars {
  testing::TestDevice::Placed placed;
  std::vector<HostTensor> host;  // the CPU scalars' memory
};

PlacedWithScalars placeWithCpuScalars(const Fusion& fusion, const std::vector<HostValue>& inputs) {
  PlacedWithScalars p{testing::testDevice().place(inputs), {}};
  p.host.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Val* in = fusion.inputs()[i];
    if (!in->isTensor() || !in->asTensor()->isCpu()) continue;
    p.host.push_back(std::get<HostTensor>(inputs[i]).contiguous());
    const HostTensor& h = p.host.back();
    p.placed.values[i] = device::DeviceTensor{reinterpret_cast<uintptr_t>(h.data()), h.dtype(), {}, {}, -1};
  }
  return p;
}

std::vector<HostValue> runWithCpuScalars(exec::FusionCache& cache, const Fusion& fusion,
                                         const std::vector<HostValue>& inputs) {
  const PlacedWithScalars p = placeWithCpuScalars(fusion, inputs);
  const std::vector<device::DeviceOutput> outputs = cache.run(p.placed.values, nullptr, /*wait=*/true);
  std::vector<HostValue> got;
  for (const device::DeviceOutput& out : outputs) got.emplace_back(testing::testDevice().fetch(out.tensor));
  return got;
}

HostTensor scalarTensor(DataType dtype, double value) {
  HostTensor t = HostTensor::empty(dtype, {});
  if (isFloating(dtype)) {
    t.writeDouble(0, value);
  } else {
    t.writeInt(0, static_cast<int64_t>(value));
  }
  return t;
}

void expectThrowsWith(const std::function<void()>& run, const std::string& phrase) {
  try {
    run();
    ADD_FAILURE() << "no error; expected one saying: " << phrase;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

struct ScalarCase {
  const char* name;
  DataType x_dtype;
  DataType scalar_dtype;
  std::vector<int64_t> sizes;
  // The fusion of x (an input tensor) and s (the CPU scalar): its outputs added.
  std::function<void(Fusion&, TensorView* x, TensorView* s)> build;
};

class CpuScalars : public ::testing::TestWithParam<ScalarCase> {};

TEST_P(CpuScalars, KernelsReadTheValueOfEachRun) {
  const ScalarCase& c = GetParam();
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor(std::vector<int64_t>(c.sizes.size(), -1),
                                 std::vector<std::optional<bool>>(c.sizes.size(), true), c.x_dtype);
    TensorView* s = defineTensor({}, {}, c.scalar_dtype, /*is_cpu=*/true);
    c.build(*f, x, s);
  }
  auto cache = testing::testFusionCache(f, {});
  const HostTensor x = testing::randomTensor(c.x_dtype, c.sizes, 5);
  for (double value : {2.5, -3.0, 7.0}) {
    const std::vector<HostValue> inputs{x, scalarTensor(c.scalar_dtype, value)};
    testing::expectClose(runWithCpuScalars(*cache, *f, inputs), evaluate(*f, inputs));
  }
  // A new value is no new signature: one plan, its kernels with no parameter for the scalar.
  EXPECT_EQ(cache->size(), 1u);
  for (const auto& k : cache->lastPlan()->compiled().kernels) {
    if (!k) continue;
    for (const kernel::TensorParam& p : k->tensors) EXPECT_FALSE(p.val == f->inputs()[1]) << k->name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedulers, CpuScalars,
    ::testing::Values(
        ScalarCase{"pointwise_broadcast", DataType::Float, DataType::Float, {33, 65},
                   [](Fusion& f, TensorView* x, TensorView* s) {
                     f.addOutput(mul(x, broadcastInDim(s, {f.constant(int64_t{33}), f.constant(int64_t{65})}, {})));
                   }},
        ScalarCase{"implicit_broadcast_bf16", DataType::BFloat16, DataType::Float, {8, 1024},
                   [](Fusion& f, TensorView* x, TensorView* s) {
                     f.addOutput(cast(add(cast(x, DataType::Float), s), DataType::BFloat16));
                   }},
        ScalarCase{"bf16_scalar", DataType::BFloat16, DataType::BFloat16, {7, 9},
                   [](Fusion& f, TensorView* x, TensorView* s) { f.addOutput(mul(x, s)); }},
        ScalarCase{"int64_scalar_double", DataType::Double, DataType::Int64, {1, 17},
                   [](Fusion& f, TensorView* x, TensorView* s) { f.addOutput(sub(x, s)); }},
        ScalarCase{"inner_reduction", DataType::Float, DataType::Float, {6, 300},
                   [](Fusion& f, TensorView* x, TensorView* s) {
                     f.addOutput(reduce(OpKind::Sum, mul(x, s)->asTensor(), {1}));
                   }},
        ScalarCase{"outer_reduction_and_pointwise", DataType::Float, DataType::Double, {129, 5},
                   [](Fusion& f, TensorView* x, TensorView* s) {
                     f.addOutput(reduce(OpKind::Max, add(x, s)->asTensor(), {0}));
                     f.addOutput(div(x, s));
                   }},
        ScalarCase{"persistent_softmax_scale", DataType::Float, DataType::Float, {4, 96},
                   [](Fusion& f, TensorView* x, TensorView* s) {
                     TensorView* scaled = mul(x, s)->asTensor();
                     TensorView* m = broadcast(reduce(OpKind::Max, scaled, {1}), {false, true});
                     TensorView* e = unaryOp(OpKind::Exp, sub(scaled, m))->asTensor();
                     f.addOutput(div(e, broadcast(reduce(OpKind::Sum, e, {1}), {false, true})));
                   }}),
    [](const ::testing::TestParamInfo<ScalarCase>& info) { return std::string(info.param.name); });

TEST(CpuScalar, AMatmulEpilogueReadsIt) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* s = defineTensor({}, {}, DataType::Float, /*is_cpu=*/true);
    f->addOutput(cast(mul(matmul(a, b, DataType::Float), s), DataType::BFloat16));
  }
  auto cache = testing::testFusionCache(f, {});
  const std::vector<HostValue> inputs{testing::randomTensor(DataType::BFloat16, {64, 32}, 1),
                                      testing::randomTensor(DataType::BFloat16, {32, 48}, 2),
                                      scalarTensor(DataType::Float, 0.125)};
  testing::expectClose(runWithCpuScalars(*cache, *f, inputs), evaluate(*f, inputs));
}

// A device whose memory the host does not reach (a GPU): a device tensor where the definition says CPU
// scalar is refused before anything launches, and so is returning the scalar's own memory.
TEST(CpuScalar, OnAGpuTheScalarMustBeInHostMemory) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* s = defineTensor({}, {}, DataType::Float, /*is_cpu=*/true);
    f->addOutput(mul(x, s));
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const auto x = device::DeviceTensor::contiguous(0x100000, DataType::Float, {256});
  const HostTensor host = scalarTensor(DataType::Float, 2.0);
  const device::DeviceTensor cpu{reinterpret_cast<uintptr_t>(host.data()), DataType::Float, {}, {}, -1};
  EXPECT_EQ(cache.run({x, cpu}).size(), 1u);
  EXPECT_EQ(ops.launches.load(), 1);
  const auto on_gpu = device::DeviceTensor::contiguous(0x200000, DataType::Float, {}, 0);
  expectThrowsWith([&] { cache.run({x, on_gpu}); },
                            "input 1: T1 is defined as a CPU scalar (define_tensor(is_cpu=True)) but is on cuda:0");

  auto g = std::make_shared<Fusion>();
  {
    FusionGuard guard(g.get());
    TensorView* x2 = defineTensor({-1}, {true}, DataType::Float);
    TensorView* s = defineTensor({}, {}, DataType::Float, /*is_cpu=*/true);
    g->addOutput(mul(x2, s));
    g->addOutput(broadcastInDim(s, {g->constant(int64_t{4})}, {}));
  }
  exec::FusionCache viewing(g, {}, &ops, DeviceInfo::h100Sxm());
  expectThrowsWith([&] { viewing.run({x, cpu}); }, "is a view of T1, a CPU scalar input (is_cpu=True)");
}

}  // namespace
}  // namespace braze
