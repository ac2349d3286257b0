#include "target/device_info.h"

#include "support/error.h"

#include <cctype>
#include <cstdlib>
#include <vector>

namespace braze {

std::string DeviceInfo::arch() const {
  return vendor == GpuVendor::Amd ? gfx_arch : fmt::format("sm_{}{}", major, minor);
}

std::string DeviceInfo::toString() const {
  const std::string tuned = tuning == HeuristicTuning{} ? "" : fmt::format(", tuning: {}", tuning.toString());
  if (vendor == GpuVendor::Amd) {
    return fmt::format("{} ({}, HIP kernels, {} CUs, wavefront {}, {} threads/CU, {} KiB LDS/CU, {} KiB LDS/block, {} MiB L2, "
                       "{:.0f} GB/s{})",
                       name, arch(), sm_count, warp_size, max_threads_per_sm, smem_per_sm / 1024,
                       smem_per_block_optin / 1024, l2_bytes / (1024 * 1024), memory_bandwidth_gbs, tuned);
  }
  return fmt::format("{} ({}, {} SMs, {} threads/SM, {} KiB smem/SM, {} KiB smem/block opt-in, {} MiB L2, {:.0f} GB/s{})",
                     name, arch(), sm_count, max_threads_per_sm, smem_per_sm / 1024, smem_per_block_optin / 1024,
                     l2_bytes / (1024 * 1024), memory_bandwidth_gbs, tuned);
}

namespace {

struct TuningField {
  std::string_view name;
  int64_t HeuristicTuning::*member;
  int64_t lo, hi;
  bool power_of_two;
};

constexpr TuningField kTuningFields[] = {
    {"block_threads", &HeuristicTuning::block_threads, 32, 1024, true},
    {"max_chunks_per_thread", &HeuristicTuning::max_chunks_per_thread, 1, 64, false},
    {"max_unroll", &HeuristicTuning::max_unroll, 1, 16, true},
    {"max_rows_per_thread", &HeuristicTuning::max_rows_per_thread, 1, 64, true},
    {"persistent_values", &HeuristicTuning::persistent_values, 8, 224, false},
    {"persistent_staged", &HeuristicTuning::persistent_staged, 0, 1, false},
    {"matmul_stages", &HeuristicTuning::matmul_stages, 0, 8, false},
    {"matmul_slice_bytes", &HeuristicTuning::matmul_slice_bytes, 0, 256, true},  // 0 or a power of two
    {"matmul_block_m", &HeuristicTuning::matmul_block_m, 0, 256, true},
    {"matmul_block_n", &HeuristicTuning::matmul_block_n, 0, 256, true},
    {"matmul_warps_m", &HeuristicTuning::matmul_warps_m, 0, 8, true},
    {"matmul_warps_n", &HeuristicTuning::matmul_warps_n, 0, 8, true},
    {"matmul_loads_ahead", &HeuristicTuning::matmul_loads_ahead, 0, 1, false},
    {"matmul_fragments_ahead", &HeuristicTuning::matmul_fragments_ahead, -1, 1, false},
    {"matmul_copy_parts", &HeuristicTuning::matmul_copy_parts, 0, 16, false},
    {"matmul_wgmma", &HeuristicTuning::matmul_wgmma, -1, 1, false},
    {"matmul_tma", &HeuristicTuning::matmul_tma, -1, 1, false},
    {"matmul_warp_specialized", &HeuristicTuning::matmul_warp_specialized, 0, 1, false},
    {"matmul_persistent", &HeuristicTuning::matmul_persistent, 0, 1, false},
    {"matmul_persistent_blocks", &HeuristicTuning::matmul_persistent_blocks, 0, 1 << 20, false},
    {"matmul_cluster", &HeuristicTuning::matmul_cluster, 1, 2, false},
    {"matmul_gemv", &HeuristicTuning::matmul_gemv, -1, 1, false},
    {"matmul_gemv_mma", &HeuristicTuning::matmul_gemv_mma, -1, 1, false},
    {"matmul_gemv_cols", &HeuristicTuning::matmul_gemv_cols, 0, 8, true},  // 0 or a power of two
    {"matmul_gemv_unroll", &HeuristicTuning::matmul_gemv_unroll, 0, 8, false},
    {"index_checks", &HeuristicTuning::index_checks, 0, 1, false},
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string HeuristicTuning::toString() const {
  const HeuristicTuning defaults;
  std::string out;
  for (const TuningField& field : kTuningFields) {
    if (this->*field.member == defaults.*field.member) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", field.name, this->*field.member);
  }
  return out.empty() ? "defaults" : out;
}

HeuristicTuning HeuristicTuning::parse(std::string_view text, HeuristicTuning base) {
  while (!trim(text).empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    const std::string_view key = trim(item.substr(0, equals));
    const TuningField* field = nullptr;
    for (const TuningField& f : kTuningFields) field = f.name == key ? &f : field;
    if (field == nullptr) {
      std::vector<std::string_view> known;
      for (const TuningField& f : kTuningFields) known.push_back(f.name);
      BRAZE_CHECK(false, "tuning: unknown key '{}' in '{}' (known: {})", key, item, fmt::join(known, ", "));
    }
    const std::string value(equals == std::string_view::npos ? "" : trim(item.substr(equals + 1)));
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    BRAZE_CHECK(!value.empty() && *end == '\0', "tuning: {} needs an integer value, got '{}'", key, value);
    BRAZE_CHECK(number >= field->lo && number <= field->hi && (!field->power_of_two || (number & (number - 1)) == 0),
                "tuning: {}={} is out of range (expected {} from {} to {})", key, number,
                field->power_of_two ? "a power of two" : "an integer", field->lo, field->hi);
    base.*field->member = number;
  }
  return base;
}

DeviceInfo DeviceInfo::h100Sxm() { return DeviceInfo{}; }  // the defaults

DeviceInfo DeviceInfo::h200() {
  // 132 SMs like the H100 SXM, but more of GH100's L2 enabled: the driver reports 60 MiB, not 50
  // (read on an H200, driver 580). 141 GB of HBM3e at a published 4.8 TB/s (4814 from clock and bus).
  DeviceInfo info;
  info.name = "NVIDIA H200";
  info.l2_bytes = 60 * 1024 * 1024;
  info.memory_bandwidth_gbs = 4800;
  return info;
}

DeviceInfo DeviceInfo::a100() {
  DeviceInfo info;
  info.name = "NVIDIA A100-SXM4-80GB";
  info.major = 8;
  info.minor = 0;
  info.sm_count = 108;
  info.smem_per_sm = 164 * 1024;
  info.smem_per_block_optin = 163 * 1024;
  info.l2_bytes = 40 * 1024 * 1024;
  info.memory_bandwidth_gbs = 2039;
  return info;
}

DeviceInfo DeviceInfo::l4() {
  DeviceInfo info;
  info.name = "NVIDIA L4";
  info.major = 8;
  info.minor = 9;
  info.sm_count = 58;
  info.max_threads_per_sm = 1536;  // sm_89 keeps 48 warps per SM, not sm_80/sm_90's 64
  info.smem_per_sm = 100 * 1024;
  info.smem_per_block_optin = 99 * 1024;
  info.l2_bytes = 48 * 1024 * 1024;
  info.memory_bandwidth_gbs = 300;  // GDDR6: an L4 is bandwidth-poor, which shifts the heuristics
  return info;
}

namespace {
// What CDNA2 (gfx90a) and CDNA3 (gfx942) share, from AMD's CDNA white papers and ISA guides: 64-lane
// wavefronts; 4 SIMDs per CU with up to 8 wavefronts each (2048 threads); 512 VGPRs of 64 lanes per
// SIMD, unified with the accumulation registers (131072 32-bit registers per CU, 512 per thread); 64
// KiB of LDS per CU, all of which one workgroup may use; workgroups of at most 1024 threads.
DeviceInfo cdna(std::string name, std::string gfx, int cus, int64_t l2_mib, double bandwidth_gbs) {
  DeviceInfo info;
  info.name = std::move(name);
  info.vendor = GpuVendor::Amd;
  info.major = 0;
  info.minor = 0;
  info.gfx_arch = std::move(gfx);
  info.sm_count = cus;
  info.warp_size = 64;
  info.max_threads_per_block = 1024;
  info.max_threads_per_sm = 2048;
  info.regs_per_sm = 4 * 512 * 64;
  info.max_regs_per_thread = 512;
  info.smem_per_sm = 64 * 1024;
  info.smem_per_block_optin = 64 * 1024;
  info.l2_bytes = l2_mib * 1024 * 1024;
  info.memory_bandwidth_gbs = bandwidth_gbs;
  return info;
}
}  // namespace

// MI300X: 304 CUs over 8 XCDs, 4 MiB of L2 per XCD (and a 256 MiB Infinity Cache behind it), 5.3 TB/s.
DeviceInfo DeviceInfo::mi300x() { return cdna("AMD Instinct MI300X", "gfx942", 304, 32, 5300); }
// MI250X: two GCDs, each a device of 110 CUs, 8 MiB of L2 and 1.6 TB/s (3.2 TB/s for the package).
DeviceInfo DeviceInfo::mi250x() { return cdna("AMD Instinct MI250X (one GCD)", "gfx90a", 110, 8, 1638); }
// MI210: one GCD of 104 CUs, 8 MiB of L2, 1.6 TB/s.
DeviceInfo DeviceInfo::mi210() { return cdna("AMD Instinct MI210", "gfx90a", 104, 8, 1638); }

std::optional<DeviceInfo> DeviceInfo::preset(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "h100") return h100Sxm();
  if (lower == "h200") return h200();
  if (lower == "a100") return a100();
  if (lower == "l4") return l4();
  if (lower == "mi300x") return mi300x();
  if (lower == "mi250x") return mi250x();
  if (lower == "mi210") return mi210();
  return std::nullopt;
}

}  // namespace braze
