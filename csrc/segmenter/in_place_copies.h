// How a plan carries out its in-place updates (outputs added with alias_input=) after its kernels, with
// the reference evaluator's meaning (every value is computed before any input is written):
//  1. an output that views an updated input is saved into a buffer of its own: it shows the value from
//     before the update;
//  2. a new value that is itself a view of a fusion input is staged into a buffer: writing another input
//     (or its own) could change what it views;
//  3. each new value is written into its input, from its kernel's buffer or from its staged copy.
// A value added again as a plain output is the updated input itself (Fusion::OutputUse::UpdatedInput):
// it is neither saved nor copied. Each copy runs as a copy kernel (scheduler/copy_kernel.h). Where it is
// safe, the kernel computing the new value writes it into the input instead (updatesWrittenByKernels).
#pragma once

#include "segmenter/segmented_fusion.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace braze {

struct InPlaceCopy {
  enum class Target : uint8_t { SavedOutput, Staged, Input };
  Target target = Target::Input;
  const Val* value = nullptr;  // the plan's value copied, read through segmentInputView
  int32_t staged = -1;         // Input: the earlier copy whose buffer holds the value, when it was staged
  const Val* input = nullptr;  // Input: the fusion input written
  InputLayout from, to;        // from the read's and the written memory's addresses (a buffer: row-major)
};

// Saved outputs first, then staged values, then the writes into inputs (but those of
// plan.written_in_place, which their kernels write). Throws when a new value's shape differs from its
// input's.
std::vector<InPlaceCopy> inPlaceCopies(const SegmentedFusion& plan);

// The updates a pointwise kernel can write into their input itself, instead of a buffer then copied:
// each element of the input is read only by the thread that writes its new value, before it does. So
// the new value's kernel is the only segment reading the input (itself, not a view of it), reads it
// only through elementwise ops at its shape, and nothing else reads the new value or views the input
// (an output viewing it shows the value from before the update). A scatter or index_put_accumulate into
// the input itself, which nothing else in its kernel reads, is written in place too: its kernel writes
// only the entries (a KV cache's new token), not a copy of the whole input. A segment run on the host
// (no GPU kernel) does not write into inputs: those updates stay copies.
std::unordered_map<const Val*, const Val*> updatesWrittenByKernels(const SegmentedFusion& plan);

// Whether `input` is read only as an updated input must be for its kernel (`producer`) to write the update
// in place: by the producer alone, as itself, through elementwise ops at `sizes`, and no returned output
// or other update views it.
bool readOnlyWhereTheUpdateIsComputed(const SegmentedFusion& plan, const Segment& producer, const Val* input,
                                      const std::vector<int64_t>& sizes);
// The other tensor inputs that may be the very tensor `input` is (same memory, strides and sizes) while
// the kernel computing `value` writes it into `input`: each is updated by nothing and read as `input` may
// be (readOnlyWhereTheUpdateIsComputed), so every element is read before its thread writes it. Any other
// is refused when passed so: a later kernel, or another element's thread, would read the new values.
std::vector<const Val*> inputsThatMayBeTheUpdatedInput(const SegmentedFusion& plan, const Val* value, const Val* input);

}  // namespace braze
