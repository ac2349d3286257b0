// The DeviceInfo of an AMD GPU as the HIP runtime describes it: what plans for the inputs' GPU target.
#pragma once

#include "target/device_info.h"

#include <optional>
#include <string>
#include <string_view>

namespace braze {

// The device `ordinal` as the HIP runtime describes it: the preset of its ISA (gfx942 an MI300X, gfx90a
// an MI250X GCD or, with 104 CUs, an MI210) with the runtime's name, CU count, wavefront, LDS per block,
// L2 and bandwidth where it reports plausible ones, and $BRAZE_TUNING. nullopt when there is no runtime,
// no device with that ordinal, or its ISA cannot be read.
std::optional<DeviceInfo> queryHipDevice(int ordinal = 0);

// The ISA name in a buffer hipGetDeviceProperties filled ("gfx942" of "gfx942:sramecc+:xnack-"); "" if
// none. Searched for rather than read at an offset: the struct's layout differs between ROCm releases.
std::string gfxArchIn(std::string_view properties);

// The preset an AMD ISA starts from (mi300x, mi250x or mi210 by `cus`), its arch set to `gfx_arch`.
DeviceInfo amdPresetFor(const std::string& gfx_arch, int cus);

}  // namespace braze
