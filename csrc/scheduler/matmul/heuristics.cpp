#include "scheduler/matmul/heuristics.h"

#include "scheduler/heuristics.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze {

std::string MatmulParams::toString() const {
  return fmt::format("matmul: mma.{}, {}x{} warps of {}x{} tiles ({}x{} outputs per block)", kernel::toString(shape),
                     warps_m, warps_n, tiles_m, tiles_n, blockRows(), blockCols());
}

std::string mmaUnavailable(const DeviceInfo& device, DataType operand) {
  if (device.vendor != GpuVendor::Nvidia) {
    return fmt::format("{} is not an NVIDIA GPU: mma.sync has no HIP spelling (MFMA is not emitted)", device.name);
  }
  const int sm = device.major * 10 + device.minor;
  const int needed = kernel::mmaMinimumSm(operand);
  if (sm < needed) return fmt::format("mma.sync of {} needs sm_{} or newer; {} is sm_{}", toString(operand), needed, device.name, sm);
  return "";
}

MatmulParams matmulHeuristics(const DeviceInfo& device, const MatmulProblem& problem) {
  MatmulParams p;
  p.shape = problem.operand == DataType::BFloat16 || problem.operand == DataType::Half ? kernel::MmaShape::M16N8K16
                                                                                       : kernel::MmaShape::M16N8K32;
  // Each warp a 32 x 32 output tile by default (2 x 4 mma tiles: 8 accumulators of 4 values); skinny
  // problems take fewer tiles rather than compute padding.
  p.tiles_m = problem.m <= 16 ? 1 : 2;
  p.tiles_n = std::clamp<int64_t>(ceilDiv(std::max<int64_t>(problem.n, 1), 8), 1, 4);
  // Four warps per block where the output has room for them, so blocks are a few warps and many.
  p.warps_m = problem.m <= p.tiles_m * 16 ? 1 : 2;
  p.warps_n = problem.n <= p.tiles_n * 8 ? 1 : 2;
  p.blocks_m = ceilDiv(std::max<int64_t>(problem.m, 1), p.blockRows());
  p.blocks_n = ceilDiv(std::max<int64_t>(problem.n, 1), p.blockCols());
  // An empty output launches nothing (a plan skips kernels of no blocks).
  p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_m * p.blocks_n;
  (void)device;
  return p;
}

}  // namespace braze
