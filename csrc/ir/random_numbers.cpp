#include "ir/random_numbers.h"

#include <cmath>

namespace braze {

namespace {
// The multipliers and Weyl key increments of Philox4x32 (from the paper).
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

void mulHiLo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

std::array<uint32_t, 4> wordsOf(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t call = i / 4;
  const std::array<uint32_t, 4> counter{static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32),
                                        static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  return philox4x32(counter, {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

double unit(uint32_t word) { return (static_cast<double>(word) + 0.5) * 0x1p-32; }
}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulHiLo(kMul0, c[0], hi0, lo0);
    mulHiLo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

double uniformUnit(uint64_t seed, uint64_t offset, uint64_t i) { return unit(wordsOf(seed, offset, i)[i % 4]); }

double standardNormal(uint64_t seed, uint64_t offset, uint64_t i) {
  const auto words = wordsOf(seed, offset, i);
  const size_t pair = (i % 4) / 2 * 2;
  const double radius = std::sqrt(-2.0 * std::log(unit(words[pair])));
  const double angle = 6.283185307179586 * unit(words[pair + 1]);  // 2 pi, as the CUDA code spells it
  return i % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle);
}

}  // namespace braze
