// A 128-bit digest of everything a kernel's emitted source depends on (its statements, expressions,
// variables, parameters' names, types and roles, block shape, shared memory, summary), and of nothing a
// launch of the same code may change (the grid, the arguments' values, the tensors' sizes and strides,
// which index arithmetic holds as literals where it depends on them). Two kernels with equal digests
// emit the same source in every dialect (the emitter reads only the expressions statements reach, as
// the digest does; code_digest_test checks it over the kernel corpus), so a plan of a new shape whose
// kernels' digests are known runs the loaded functions without emitting or compiling anything. Where a
// kernel holds two equal expressions under different ids (built by two KernelBuilders), the sources may
// differ in which one a statement names, and compute the same values.
#pragma once

#include "kernel/kernel_ir.h"

#include <cstddef>
#include <cstdint>

namespace braze::kernel {

struct CodeDigest {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const CodeDigest&) const = default;
};

CodeDigest codeDigest(const Kernel& kernel);

}  // namespace braze::kernel
