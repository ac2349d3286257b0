// SHA-256 against the FIPS 180-4 examples, and the incremental form against the one-shot one across
// every split of a message that crosses block boundaries (padding bugs live at 55, 56 and 64 bytes).
#include "support/sha256.h"

#include <gtest/gtest.h>

namespace braze::device {
namespace {

TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(toHex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(toHex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(toHex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(toHex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string message;
  for (int i = 0; i < 130; ++i) message += static_cast<char>('!' + i % 90);
  for (size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 130}) {
    const std::string_view m = std::string_view(message).substr(0, length);
    const Sha256Digest expected = sha256(m);
    for (size_t split = 0; split <= length; ++split) {
      Sha256 hasher;
      hasher.update(m.substr(0, split));
      hasher.update(m.substr(split));
      ASSERT_EQ(hasher.finish(), expected) << "length " << length << ", split at " << split;
    }
  }
}

}  // namespace
}  // namespace braze::device
