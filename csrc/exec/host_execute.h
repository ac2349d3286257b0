// Host tensors (numpy arrays, CPU tensors) through the one execute path: a FusionCache whose device is
// the simulated device. The tensors' memory is lent to the device for the run (no copy), the cache
// plans, packs and launches exactly as for a GPU, and the outputs come back as HostTensors: views of
// an input where the plan made a view, else the device's memory, released when the last view of it goes.
#pragma once

#include "exec/fusion_cache.h"
#include "device/sim/sim_device_ops.h"

#include <vector>

namespace braze::exec {

using namespace device;  // exec runs plans through the device layer: its names are exec's vocabulary

// The device's view of a host value: a DeviceTensor at the host address of element [0, ..., 0].
DeviceValue deviceValueOf(const HostValue& value);

// Runs `cache` (a FusionCache made with a SimDeviceOps, simDeviceOps() in general, and the DeviceInfo
// to plan for) on host inputs and waits for it. Outputs that a fusion writes
// into an input (alias_input) are written into the caller's memory and not returned, as in evaluate().
std::vector<HostValue> runOnHost(FusionCache& cache, const std::vector<HostValue>& inputs);

}  // namespace braze::exec
