// The matmul scheduler's parameters: a block of warps_m x warps_n warps, each computing a warp tile of
// tiles_m x tiles_n mma tiles (16 x 8 each) of one batch's output, walking K an mma's depth at a time.
// A pure function of (DeviceInfo, problem), unit-tested with described GPUs.
#pragma once

#include "kernel/mma_fragments.h"
#include "scheduler/device_info.h"

#include <cstdint>
#include <string>

namespace braze {

struct MatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  DataType operand = DataType::BFloat16;
};

struct MatmulParams {
  kernel::MmaShape shape = kernel::MmaShape::M16N8K16;
  int64_t warps_m = 2, warps_n = 2;  // warps per block along M and N
  int64_t tiles_m = 2, tiles_n = 4;  // mma tiles per warp along M and N
  int64_t blocks_m = 1, blocks_n = 1, grid = 1;  // grid 0: the output is empty
  int64_t blockRows() const { return warps_m * tiles_m * 16; }
  int64_t blockCols() const { return warps_n * tiles_n * 8; }
  std::string toString() const;  // heads the kernel's source
};

// Whether `device` runs mma.sync for `operand`: an NVIDIA GPU of sm_80 on (sm_89 for fp8). Empty when it
// does, else why not.
std::string mmaUnavailable(const DeviceInfo& device, DataType operand);

MatmulParams matmulHeuristics(const DeviceInfo& device, const MatmulProblem& problem);

}  // namespace braze
