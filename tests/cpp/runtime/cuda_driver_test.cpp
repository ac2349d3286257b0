// The CUDA driver loader: without a driver it says so (and that host inputs run on the simulator)
// instead of failing to load; with one, errors name the call and the driver's error, and device
// memory round-trips.
#include "device/cuda/query_device.h"
#include "support/error.h"
#include "device/cuda/cuda_driver.h"
#include "device/cuda/device_buffer.h"
#include "target/device_info.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace braze::device {
namespace {

TEST(CudaDriver, WithoutADriverEveryUseSaysWhy) {
  if (cudaAvailable()) GTEST_SKIP() << "a CUDA driver and device are present";
  EXPECT_EQ(cudaDriver(), nullptr);
  EXPECT_EQ(queryDevice(), std::nullopt);
  const std::string& reason = cudaUnavailableReason();
  EXPECT_NE(reason.find("host inputs run on the CPU simulator"), std::string::npos) << reason;
  try {
    DeviceBuffer::allocate(16);
    FAIL() << "allocated device memory without a driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(CudaDriver, ErrorsNameTheCallAndTheDriversError) {
  if (!cudaAvailable()) GTEST_SKIP() << "GPU test skipped: " << cudaUnavailableReason();
  const CudaDriver& driver = useDevice(0);
  EXPECT_EQ(driver.errorText(1), "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  try {
    driver.check(1, "cuMemAlloc_v2", "0 bytes");
    FAIL() << "check accepted an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuMemAlloc_v2 failed: CUDA_ERROR_INVALID_VALUE (invalid argument) (0 bytes)"), std::string::npos)
        << what;
  }
  EXPECT_TRUE(cudaUnavailableReason().empty());
  EXPECT_TRUE(queryDevice().has_value());
}

TEST(CudaDriver, DeviceMemoryRoundTrips) {
  if (!cudaAvailable()) GTEST_SKIP() << "GPU test skipped: " << cudaUnavailableReason();
  useDevice(0);
  std::vector<int32_t> host(1000);
  std::iota(host.begin(), host.end(), -500);
  DeviceBuffer buffer = DeviceBuffer::allocate(8 + host.size() * sizeof(int32_t));
  EXPECT_EQ(buffer.address() % 256, 0u);
  buffer.fill(0xFF);
  buffer.upload(8, host.data(), host.size() * sizeof(int32_t));
  std::vector<int32_t> back(host.size() + 2, 0);
  buffer.download(0, back.data(), back.size() * sizeof(int32_t));
  EXPECT_EQ(back[0], -1);  // the fill
  EXPECT_EQ(back[1], -1);
  EXPECT_EQ(std::vector<int32_t>(back.begin() + 2, back.end()), host);
  DeviceBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.address(), 0u);
  EXPECT_NE(moved.address(), 0u);
}

}  // namespace
}  // namespace braze::device
