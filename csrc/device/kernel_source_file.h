// Where a kernel's source is saved (after a failed compile, or with -lineinfo for profilers): in $TMPDIR
// (or /tmp) as braze_<what>_<hash><extension>, named after the kernel and the source's hash, so a rerun
// overwrites its file instead of piling up copies.
#pragma once

#include <string>
#include <string_view>

namespace braze::device {

std::string kernelSourcePath(std::string_view source, std::string_view what, std::string_view extension);

// Writes `source` there; returns the line for an error message ("Source saved to PATH", or why not).
std::string saveKernelSource(std::string_view source, std::string_view what, std::string_view extension);

}  // namespace braze::device
