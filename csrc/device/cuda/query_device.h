// The DeviceInfo of a GPU as the CUDA driver describes it: what plans for the inputs' GPU target.
#pragma once

#include "target/device_info.h"

#include <optional>

namespace braze {

// The device `ordinal` as the CUDA driver describes it (device/cuda/cuda_driver.h), with the tuning of
// $BRAZE_TUNING ("key=value,..."; see HeuristicTuning) when it is set; nullopt when there is no
// driver, no device, or no device with that ordinal.
std::optional<DeviceInfo> queryDevice(int ordinal = 0);

}  // namespace braze
