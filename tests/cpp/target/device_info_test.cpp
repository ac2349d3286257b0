// Device descriptions: the presets heuristics are tested with, and the driver's answer where there is one.
#include "device/cuda/query_device.h"
#include "target/device_info.h"

#include <gtest/gtest.h>

#include <iostream>

namespace braze {

// gtest prints a DeviceInfo that fails a comparison with this instead of its bytes.
void PrintTo(const DeviceInfo& device, std::ostream* os) { *os << device.toString(); }

namespace {

TEST(DeviceInfo, PresetsHavePublishedNumbers) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  EXPECT_EQ(h100.arch(), "sm_90");
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_EQ(h100.smem_per_sm, 228 * 1024);
  EXPECT_EQ(h100.smem_per_block_optin, 227 * 1024);
  EXPECT_EQ(h100.l2_bytes, 50 << 20);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_gbs, 3352);

  const DeviceInfo h200 = DeviceInfo::h200();
  EXPECT_EQ(h200.arch(), "sm_90");
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_EQ(h200.l2_bytes, 60 << 20);
  EXPECT_GT(h200.memory_bandwidth_gbs, h100.memory_bandwidth_gbs);

  const DeviceInfo a100 = DeviceInfo::a100();
  EXPECT_EQ(a100.arch(), "sm_80");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(a100.smem_per_block_optin, 163 * 1024);
  EXPECT_EQ(a100.l2_bytes, 40 << 20);

  const DeviceInfo l4 = DeviceInfo::l4();
  EXPECT_EQ(l4.arch(), "sm_89");
  EXPECT_EQ(l4.sm_count, 58);
  EXPECT_EQ(l4.max_threads_per_sm, 1536);
  EXPECT_EQ(l4.smem_per_sm, 100 * 1024);
  EXPECT_LT(l4.memory_bandwidth_gbs, a100.memory_bandwidth_gbs);

  for (const DeviceInfo& device : {h100, h200, a100, l4}) {
    SCOPED_TRACE(device.toString());
    EXPECT_EQ(device.warp_size, 32);
    EXPECT_EQ(device.max_threads_per_block, 1024);
    EXPECT_EQ(device.regs_per_sm, 65536);
    EXPECT_LT(device.smem_per_block_optin, device.smem_per_sm);  // 1 KiB per block is reserved
    EXPECT_EQ(device.max_threads_per_sm % device.warp_size, 0);
  }
}

TEST(DeviceInfo, PresetsAreFoundByNameIgnoringCase) {
  EXPECT_EQ(DeviceInfo::preset("H100"), DeviceInfo::h100Sxm());
  EXPECT_EQ(DeviceInfo::preset("h200"), DeviceInfo::h200());
  EXPECT_EQ(DeviceInfo::preset("A100"), DeviceInfo::a100());
  EXPECT_EQ(DeviceInfo::preset("l4"), DeviceInfo::l4());
  EXPECT_EQ(DeviceInfo::preset("MI300X"), DeviceInfo::mi300x());
  EXPECT_EQ(DeviceInfo::preset("mi250x"), DeviceInfo::mi250x());
  EXPECT_EQ(DeviceInfo::preset("mi210"), DeviceInfo::mi210());
  EXPECT_EQ(DeviceInfo::preset("nope"), std::nullopt);
  EXPECT_EQ(DeviceInfo::preset(""), std::nullopt);
}

TEST(DeviceInfo, AmdPresetsAreCdnaWithWavefront64) {
  const DeviceInfo mi300x = DeviceInfo::mi300x();
  EXPECT_EQ(mi300x.vendor, GpuVendor::Amd);
  EXPECT_EQ(mi300x.arch(), "gfx942");
  EXPECT_EQ(mi300x.sm_count, 304);
  EXPECT_EQ(mi300x.warp_size, 64);
  EXPECT_EQ(mi300x.smem_per_block_optin, 64 * 1024);
  EXPECT_EQ(DeviceInfo::mi250x().arch(), "gfx90a");
  EXPECT_EQ(DeviceInfo::mi250x().sm_count, 110);  // one GCD
  EXPECT_EQ(DeviceInfo::mi210().arch(), "gfx90a");
  EXPECT_EQ(DeviceInfo::mi210().sm_count, 104);
  EXPECT_EQ(DeviceInfo::h100Sxm().vendor, GpuVendor::Nvidia);
  EXPECT_EQ(mi300x.toString(),
            "AMD Instinct MI300X (gfx942, HIP kernels, 304 CUs, wavefront 64, 2048 threads/CU, 64 KiB LDS/CU, 64 KiB LDS/block, "
            "32 MiB L2, 5300 GB/s)");
}

TEST(DeviceInfo, ToStringNamesArchAndSizes) {
  EXPECT_EQ(DeviceInfo::l4().toString(),
            "NVIDIA L4 (sm_89, 58 SMs, 1536 threads/SM, 100 KiB smem/SM, 99 KiB smem/block opt-in, 48 MiB L2, "
            "300 GB/s)");
}

TEST(DeviceInfo, QueryDeviceFindsNothingOrARealDevice) {
  const std::optional<DeviceInfo> device = queryDevice();
  if (!device) GTEST_SKIP() << "no CUDA driver or device";
  std::cout << "device 0: " << device->toString() << "\n";
  EXPECT_GT(device->sm_count, 0);
  EXPECT_GE(device->major, 7);
  EXPECT_EQ(device->warp_size, 32);
  EXPECT_GT(device->smem_per_block_optin, 0);
  EXPECT_GT(device->l2_bytes, 0);
  EXPECT_GT(device->memory_bandwidth_gbs, 0);
  // On a GPU that has a preset, the driver must agree with the published numbers.
  for (const DeviceInfo& preset : {DeviceInfo::h100Sxm(), DeviceInfo::h200(), DeviceInfo::a100(), DeviceInfo::l4()}) {
    if (device->name != preset.name) continue;
    DeviceInfo expected = preset;
    expected.memory_bandwidth_gbs = device->memory_bandwidth_gbs;  // clock x bus width, not the marketing figure
    EXPECT_EQ(*device, expected) << "preset: " << preset.toString();
    EXPECT_NEAR(device->memory_bandwidth_gbs, preset.memory_bandwidth_gbs, 0.05 * preset.memory_bandwidth_gbs);
  }
  EXPECT_EQ(queryDevice(-1), std::nullopt);
  EXPECT_EQ(queryDevice(1 << 20), std::nullopt);
}

}  // namespace
}  // namespace braze
