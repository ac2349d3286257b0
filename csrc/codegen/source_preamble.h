// What every kernel translation unit starts with, in the dialect of its compiler: NVRTC's CUDA C++ or
// hiprtc's HIP. Kernel bodies are the same text in both (source_emitter.cpp); the preamble defines the
// names they use (the narrow float storage types braze_half ..., their braze_load_* / braze_store_* /
// braze_round_* conversions, braze_shfl_xor, braze_load_l2, BRAZE_WARP_LANES) for its dialect.
#pragma once

#include <string>
#include <string_view>

namespace braze::codegen {

enum class SourceDialect { Cuda, Hip };
std::string_view toString(SourceDialect dialect);  // "CUDA", "HIP"

// The includes and `__device__ __forceinline__ braze_*` helpers: once-rounded float arithmetic, Python
// remainder, integer pow and gcd, shifts of a given width, the narrow float formats (the fnuz fp8 pair
// in software, bit for bit numerics.cpp, in both dialects; every narrow type in software in HIP),
// CUDA-style saturating float -> integer conversion. `fp8`: the kernel moves e4m3fn or e5m2 values, so
// a CUDA kernel needs cuda_fp8.h (HIP needs no header for them).
std::string opsPreamble(SourceDialect dialect, bool fp8);
// braze_uniform_unit and braze_standard_normal: ir/random_numbers.cpp's Philox numbers (the same text
// in both dialects).
std::string randomPreamble();
// braze_checked_index: an index value kept in range, one outside reported to the device's index-error
// record as kernel/index_errors.h packs it (the same text in both dialects).
std::string indexCheckPreamble();

}  // namespace braze::codegen
