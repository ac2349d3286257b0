// $BRAZE_TUNING ("key=value,..."; see HeuristicTuning) applied to a queried GPU's description: the
// same rule for every vendor's device query.
#pragma once

#include "target/device_info.h"

namespace braze {

// `info` with the tuning of $BRAZE_TUNING when it is set; a malformed value is a Value error naming it.
DeviceInfo withTuningFromEnv(DeviceInfo info);

}  // namespace braze
