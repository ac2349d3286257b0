// MadeDevices, which keeps each vendor's DeviceOps per ordinal: a device is made once, one that fails to
// open leaves no slot behind (the next call tries again), and a trim reaches every device made even where
// one of them raises, the first error raised after all of them.
#include "device/made_devices.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace braze {
namespace {

// A device that fails to open at ordinal 7 and fails to trim at ordinal 1; the others return their
// ordinal + 10 bytes, and count their trims and how many were made.
struct FakeOps {
  static inline int made = 0;
  explicit FakeOps(int ordinal) : ordinal(ordinal) {
    if (ordinal == 7) throw std::runtime_error("device 7 does not open");
    ++made;
  }
  size_t releaseCachedBlocks() {
    ++trims;
    if (ordinal == 1) throw std::runtime_error("device 1 is capturing");
    return static_cast<size_t>(ordinal + 10);
  }
  int ordinal;
  int trims = 0;
};

TEST(MadeDevices, MakesEachDeviceOnceAndLeavesNoSlotForOneThatFails) {
  FakeOps::made = 0;
  device::MadeDevices<FakeOps> devices;
  FakeOps& zero = devices.get(0);
  EXPECT_EQ(&devices.get(0), &zero);
  EXPECT_EQ(FakeOps::made, 1);
  EXPECT_THROW(devices.get(7), std::runtime_error);
  EXPECT_THROW(devices.get(7), std::runtime_error) << "tried again, not a null slot";
  EXPECT_EQ(devices.releaseCachedBlocks(), 10u) << "only the device made";
}

TEST(MadeDevices, TrimsEveryDeviceWhereOneRaisesThenRaisesTheFirstError) {
  device::MadeDevices<FakeOps> devices;
  FakeOps& zero = devices.get(0);
  FakeOps& one = devices.get(1);
  FakeOps& two = devices.get(2);
  try {
    devices.releaseCachedBlocks();
    FAIL() << "the capturing device's error was swallowed";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "device 1 is capturing");
  }
  EXPECT_EQ(zero.trims, 1);
  EXPECT_EQ(one.trims, 1);
  EXPECT_EQ(two.trims, 1) << "the device after the one that raised is trimmed too";
}

}  // namespace
}  // namespace braze
