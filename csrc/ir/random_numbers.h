// The random numbers of uniform and normal: element i of a tensor drawn with (seed, offset) is a pure
// function of the three, from the Philox4x32-10 counter-based generator (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11). Each Philox call gives four 32-bit words; element i reads word
// i % 4 of the call whose counter is (i / 4, offset) under the key `seed`. So a tensor's values do not
// depend on who computes them or in what order: the reference evaluator, the simulator and a kernel
// agree element for element.
#pragma once

#include <array>
#include <cstdint>

namespace braze {

// Philox4x32 with 10 rounds: four words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A uniform number in (0, 1): (word + 0.5) / 2^32 for element i's word, exact in a double.
double uniformUnit(uint64_t seed, uint64_t offset, uint64_t i);
// A standard normal number: Box-Muller on the word pair (0, 1) or (2, 3) of element i's call, the
// cosine branch for even i and the sine branch for odd i.
double standardNormal(uint64_t seed, uint64_t offset, uint64_t i);

}  // namespace braze
