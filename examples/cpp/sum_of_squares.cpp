// The README's C++ example: a fusion built with the C++ builders, its readable IR, the reference
// evaluator, the plan, and the execute path (FusionCache, PreparedPlan, the kernels) on the simulated
// device planned for an H100. Exits 1 if the kernels' results differ from the reference's.
#include "exec/host_execute.h"
#include "exec/pipeline.h"
#include "ir/ops.h"
#include "reference/evaluator.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

int main() {
  auto fusion = std::make_shared<braze::Fusion>();
  {
    braze::FusionGuard guard(fusion.get());
    auto* x = braze::defineTensor({-1, -1}, {true, true}, braze::DataType::Float);
    auto* y = braze::reduce(braze::OpKind::Sum, braze::mul(x, x)->asTensor(), {1});
    fusion->addOutput(y);
  }
  std::cout << fusion->toString();  // readable IR

  braze::HostTensor x = braze::HostTensor::empty(braze::DataType::Float, {5, 33});
  for (int64_t i = 0; i < x.numel(); ++i) x.writeDouble(i, static_cast<double>(i % 7) - 3.0);
  const std::vector<braze::HostValue> inputs{x};

  const auto expected = braze::evaluate(*fusion, inputs);  // the reference evaluator
  const braze::SegmentedFusion plan = braze::planSegments(*fusion, inputs);
  std::cout << plan.toString();  // the plan, as Python prints it

  // The execute path, on the simulated device planned for an H100 (a GPU: omit the device arguments).
  braze::exec::FusionCache cache(fusion, {}, &braze::device::simDeviceOps(), braze::DeviceInfo::h100Sxm());
  const auto outputs = braze::exec::runOnHost(cache, inputs);

  const auto& got = std::get<braze::HostTensor>(outputs[0]);
  const auto& want = std::get<braze::HostTensor>(expected[0]);
  for (int64_t row = 0; row < want.numel(); ++row) {
    if (std::abs(got.readDouble(row) - want.readDouble(row)) > 1e-4 * std::abs(want.readDouble(row))) {
      std::printf("row %lld: kernel %g, reference %g\n", static_cast<long long>(row), got.readDouble(row),
                  want.readDouble(row));
      return 1;
    }
  }
  std::printf("sum of squares of 5 rows: the kernels match the reference\n");
  return 0;
}
