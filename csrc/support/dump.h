// BRAZE_DUMP: a comma-separated list of things to print to stderr while braze works
// ("segments" prints each execute's plan). Read once per process.
#pragma once

#include <string_view>

namespace braze {

bool dumpEnabled(std::string_view what);
// dumpEnabled("after:<step>"), without building the name: planning asks it at every step of every plan.
bool dumpEnabledAfter(std::string_view step);

}  // namespace braze
