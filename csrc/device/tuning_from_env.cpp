#include "device/tuning_from_env.h"

#include "support/error.h"

#include <cstdlib>

namespace braze {

DeviceInfo withTuningFromEnv(DeviceInfo info) {
  if (const char* tuning = std::getenv("BRAZE_TUNING"); tuning != nullptr && *tuning != '\0') {
    try {
      info.tuning = HeuristicTuning::parse(tuning);
    } catch (const Error& error) {
      throw Error(error.kind(), fmt::format("BRAZE_TUNING: {}", error.what()));
    }
  }
  return info;
}

}  // namespace braze
