#include "ir/fusion.h"
// Placeholder: being written in this session.
namespace braze {
std::string Fusion::toString() const { return "(printer pending)"; }
std::string Fusion::toPython() const { return "(printer pending)"; }
}  // namespace braze
