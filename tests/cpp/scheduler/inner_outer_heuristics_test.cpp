// The inner-outer persistent scheduler's heuristics, on a described H100 and A100: the layer-norm
// backward's rows (grad_out and x kept, two outer reductions) at Thunder's nanoGPT width and at a large one.
#include "scheduler/inner_outer/heuristics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>

namespace braze {
namespace {

InnerOuterProblem layerNormBackward(int64_t rows, int64_t hidden, int64_t outer = 2) {
  return {{.rows = rows, .row_length = hidden, .inner = true, .wants_persistent = true, .max_vectorize = 4,
           .cached_tensors = 2, .widest_dtype_bytes = 4},
          outer,
          {},
          4,
          {}};
}

TEST(InnerOuterHeuristics, RowsAndPartialSumsStayInRegistersAndTheBlocksFillTheGpu) {
  for (const DeviceInfo& device : {DeviceInfo::h100Sxm(), DeviceInfo::a100()}) {
    for (auto [rows, hidden] : {std::pair<int64_t, int64_t>{2048, 768}, {16384, 4096}}) {
      const InnerOuterParams p = innerOuterHeuristics(device, layerNormBackward(rows, hidden));
      SCOPED_TRACE(p.toString());
      EXPECT_TRUE(p.inner.persistent);
      EXPECT_FALSE(p.inner.shared_cache);
      EXPECT_EQ(p.inner.vectorize, 4);
      EXPECT_GE(p.inner.threads_x * p.inner.chunks * p.inner.vectorize, hidden);
      // The partial sums count as kept values: (2 tensors + 2 sums) per element a thread owns.
      EXPECT_LE(p.inner.chunks * p.inner.vectorize * 4, device.tuning.persistent_values);
      EXPECT_GE(p.blocks, device.sm_count);  // every SM busy
      // Every block walks several row groups, so the partials stay small next to the rows (or, with
      // fewer row groups, a block per SM walks what there is).
      const int64_t row_groups = (rows + p.inner.threads_y - 1) / p.inner.threads_y;
      EXPECT_TRUE(row_groups / p.blocks >= 4 || p.blocks == device.sm_count) << row_groups;
      EXPECT_EQ(p.partial_rows, p.combine_in_block ? p.blocks : p.blocks * p.inner.threads_y);
      EXPECT_EQ(p.finish_threads_x, device.warp_size);
      EXPECT_LE(p.finish_threads_x * p.finish_threads_y, device.max_threads_per_block);
    }
  }
}

// Staging tuned on (persistent_staged=1): the layer-norm backward's bf16 grad_out and x go to two
// shared-memory stages, the partial sums stay in registers; the blocks still fill the GPU, and as many
// stay resident as shared memory allows (the stages and the thread rows' combined partial sums).
TEST(InnerOuterHeuristics, StagedRowsKeepThePartialSumsInRegistersAndFillTheGpu) {
  DeviceInfo h100 = DeviceInfo::h100Sxm();
  InnerOuterProblem problem = layerNormBackward(16384, 4096);
  problem.rows.max_vectorize = 8;
  problem.rows.row_data_bytes = 4;  // grad_out and x, bf16
  problem.rows.row_data_min_bytes = 2;
  const InnerOuterParams kept = innerOuterHeuristics(h100, problem);
  EXPECT_FALSE(kept.inner.staged);
  h100.tuning.persistent_staged = 1;
  const InnerOuterParams staged = innerOuterHeuristics(h100, problem);
  ASSERT_TRUE(staged.inner.staged) << staged.toString();
  const int64_t threads = staged.inner.threads_x * staged.inner.threads_y;
  EXPECT_EQ(staged.inner.stage_bytes, staged.inner.threads_y * staged.inner.chunks * staged.inner.threads_x * 8 * 4);
  EXPECT_LE(2 * staged.inner.stage_bytes + staged.combine_bytes + 1024, h100.smem_per_block_optin);
  EXPECT_GE(staged.blocks, h100.sm_count);
  const int64_t per_sm = std::min<int64_t>(h100.max_threads_per_sm / threads,
                                           h100.smem_per_sm / (2 * staged.inner.stage_bytes + staged.combine_bytes));
  EXPECT_LE(staged.blocks, per_sm * h100.sm_count);
  EXPECT_NE(staged.toString().find("staged in shared memory"), std::string::npos);
  // Without row data to stage (none copies whole), the kept kernel.
  problem.rows.row_data_bytes = 0;
  EXPECT_FALSE(innerOuterHeuristics(h100, problem).inner.staged);
}

TEST(InnerOuterHeuristics, TheFinishBlockStaysWithinALaunchableBlockAtEveryTunedWidth) {
  // The finish takes twice the tuned block, and never more threads than a block may have (a tuned
  // block_threads of 1024 asked for a 32 x 64 finish).
  for (const DeviceInfo& base : {DeviceInfo::h100Sxm(), DeviceInfo::a100()}) {
    for (int64_t threads : {32, 128, 512, 1024}) {
      DeviceInfo device = base;
      device.tuning.block_threads = threads;
      const InnerOuterParams p = innerOuterHeuristics(device, layerNormBackward(390, 40));
      SCOPED_TRACE(p.toString());
      EXPECT_LE(p.finish_threads_x * p.finish_threads_y, device.max_threads_per_block);
      EXPECT_LE(p.finish_threads_x * p.finish_threads_y, std::max<int64_t>(2 * threads, device.warp_size));
    }
  }
}

TEST(InnerOuterHeuristics, FewRowsGetABlockPerRowGroupAndNoIdlePartialRows) {
  const InnerOuterParams p = innerOuterHeuristics(DeviceInfo::h100Sxm(), layerNormBackward(3, 768));
  EXPECT_EQ(p.blocks, (3 + p.inner.threads_y - 1) / p.inner.threads_y);
  EXPECT_EQ(p.partial_rows, p.blocks);
  EXPECT_LE(p.finish_threads_y, 8);
}

TEST(InnerOuterHeuristics, ABlockAddsUpItsThreadRowsPartialSumsWhenTheyFitInSharedMemory) {
  // nanoGPT's width: several rows per block, whose two rows of float sums each (24 KiB at 4 rows)
  // are added in shared memory, so the partial rows are a quarter as many bytes to write and read.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const InnerOuterParams narrow = innerOuterHeuristics(h100, layerNormBackward(2048, 768));
  ASSERT_GT(narrow.inner.threads_y, 1) << narrow.toString();
  EXPECT_TRUE(narrow.combine_in_block) << narrow.toString();
  EXPECT_EQ(narrow.combine_bytes, 2 * narrow.inner.threads_y * 768 * 4);
  EXPECT_EQ(narrow.partial_rows, narrow.blocks);
  EXPECT_NE(narrow.toString().find("a partial row per block"), std::string::npos) << narrow.toString();
  // Double sums take twice the bytes; too many for the budget, each thread row stores its own.
  InnerOuterProblem doubles = layerNormBackward(2048, 768, 4);
  doubles.accumulator_bytes = 8;
  const InnerOuterParams wide = innerOuterHeuristics(h100, doubles);
  if (wide.inner.threads_y > 1 && 4 * wide.inner.threads_y * 768 * 8 > 32 * 1024) {
    EXPECT_FALSE(wide.combine_in_block) << wide.toString();
    EXPECT_EQ(wide.partial_rows, wide.blocks * wide.inner.threads_y);
    EXPECT_EQ(wide.combine_bytes, 0);
  }
  // One row per block: nothing to add up.
  for (const InnerOuterParams& p : {innerOuterHeuristics(h100, layerNormBackward(16384, 8192))}) {
    if (p.inner.threads_y == 1) {
      EXPECT_FALSE(p.combine_in_block) << p.toString();
    }
  }
}

TEST(InnerOuterHeuristics, TheBlockCombineStaysInItsSharedMemoryBudgetOnEveryDevice) {
  for (const DeviceInfo& device : {DeviceInfo::h100Sxm(), DeviceInfo::a100(), DeviceInfo::mi300x()}) {
    for (int64_t hidden : {96, 768, 1600, 4096, 12288}) {
      for (int64_t outer : {1, 2, 8}) {
        for (int64_t acc : {4, 8}) {
          InnerOuterProblem problem = layerNormBackward(2048, hidden, outer);
          problem.accumulator_bytes = acc;
          const InnerOuterParams p = innerOuterHeuristics(device, problem);
          SCOPED_TRACE(p.toString());
          EXPECT_LE(p.combine_bytes, 32 * 1024);
          EXPECT_LE(p.combine_bytes, device.smem_per_block_optin);
          if (p.combine_in_block) {
            EXPECT_GT(p.inner.threads_y, 1);
            EXPECT_EQ(p.combine_bytes, outer * p.inner.threads_y * hidden * acc);
            EXPECT_EQ(p.partial_rows, p.blocks);
          } else {
            EXPECT_EQ(p.combine_bytes, 0);
            EXPECT_EQ(p.partial_rows, p.blocks * p.inner.threads_y);
          }
        }
      }
    }
  }
}

TEST(InnerOuterHeuristics, MoreOuterReductionsKeepFewerRowValuesInRegisters) {
  // Each outer reduction adds a partial sum per element a thread owns: enough of them push the row to
  // shared memory, and the resident blocks per SM (so the grid) shrink with the registers used.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const InnerOuterParams two = innerOuterHeuristics(h100, layerNormBackward(16384, 8192, 2));
  const InnerOuterParams eight = innerOuterHeuristics(h100, layerNormBackward(16384, 8192, 8));
  EXPECT_TRUE(two.inner.persistent);
  EXPECT_FALSE(two.inner.shared_cache) << two.toString();
  EXPECT_TRUE(eight.inner.shared_cache || !eight.inner.persistent) << eight.toString();
}

TEST(InnerOuterHeuristics, AnExtraReductionSpreadsItsColumnsOverTheWholeBlock) {
  // nanoGPT's layer-norm backward with the 3072-wide bias grad of the next linear: every thread of the
  // block takes its own columns of each row, so the sums per thread are few.
  InnerOuterProblem problem = layerNormBackward(2048, 768);
  problem.extras.push_back({3072, 8});
  const InnerOuterParams p = innerOuterHeuristics(DeviceInfo::h100Sxm(), problem);
  ASSERT_EQ(p.extras.size(), 1u);
  const int64_t threads = p.inner.threads_x * p.inner.threads_y;
  EXPECT_EQ(p.extras[0].vectorize, 8);
  EXPECT_GE(p.extras[0].chunks * threads * p.extras[0].vectorize, 3072);
  EXPECT_LT((p.extras[0].chunks - 1) * threads * p.extras[0].vectorize, 3072);
  EXPECT_NE(p.toString().find("3072 more columns"), std::string::npos) << p.toString();
  // The same blocks as without it: the grid follows the rows.
  EXPECT_EQ(p.blocks, innerOuterHeuristics(DeviceInfo::h100Sxm(), layerNormBackward(2048, 768)).blocks);
}

TEST(InnerOuterHeuristics, AnExtraReductionOverRowsOfItsOwnKeepsTheNormsBlocksAndSaysItsRows) {
  // A ViT's head bias grad (a row per image) beside the final norm's backward (a row per token): the same
  // blocks and vectors as over the norm's rows; the summary names the rows, and only rows of their own.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  InnerOuterProblem same = layerNormBackward(256 * 197, 768);
  same.extras.push_back({1000, 8, 2});
  InnerOuterProblem own = same;
  own.extras[0].own_rows = 256;
  const InnerOuterParams a = innerOuterHeuristics(h100, same), b = innerOuterHeuristics(h100, own);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.extras.at(0).vectorize, b.extras.at(0).vectorize);
  EXPECT_EQ(b.extras.at(0).own_rows, 256);
  EXPECT_NE(a.toString().find("1000 more columns over the rows:"), std::string::npos) << a.toString();
  EXPECT_NE(b.toString().find("1000 more columns over 256 rows of their own:"), std::string::npos) << b.toString();
}

TEST(InnerOuterHeuristics, AnExtraReductionHasSeveralRowsInFlightWithinTheRegistersTheRowsFree) {
  // A block walks a dozen rows of the linear's grads or more, each a round trip to memory: their loads
  // go out several rows at a time, as many as the kept rows' registers (free by then) hold, at most 4.
  for (const DeviceInfo& device : {DeviceInfo::h100Sxm(), DeviceInfo::a100()}) {
    for (auto [rows, hidden, columns, bytes] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2048, 768, 3072, 2},
                                                {2048, 768, 3072, 4}, {4096, 64, 8192, 4}, {512, 4096, 1024, 2}}) {
      InnerOuterProblem problem = layerNormBackward(rows, hidden);
      problem.extras.push_back({columns, 8, bytes});
      const InnerOuterParams p = innerOuterHeuristics(device, problem);
      SCOPED_TRACE(p.toString());
      const ExtraOuterParams& e = p.extras.at(0);
      EXPECT_GE(e.rows_in_flight, 1);
      EXPECT_LE(e.rows_in_flight, 4);
      const int64_t row_kept = p.inner.chunks * p.inner.vectorize * problem.rows.cached_tensors;
      const int64_t row_registers = (e.chunks * e.vectorize * bytes + 3) / 4;
      if (e.rows_in_flight > 1 && p.inner.persistent && !p.inner.shared_cache) {
        EXPECT_LE(e.rows_in_flight * row_registers, row_kept);
      }
      EXPECT_NE(p.toString().find(std::to_string(e.rows_in_flight) + " rows in flight"), std::string::npos);
    }
  }
  // nanoGPT's (the compare.py row): 3 chunks of 8 bf16 per thread per row, 4 rows in flight.
  InnerOuterProblem nano = layerNormBackward(2048, 768);
  nano.rows.max_vectorize = 8;
  nano.extras.push_back({3072, 8, 2});
  const InnerOuterParams p = innerOuterHeuristics(DeviceInfo::h100Sxm(), nano);
  EXPECT_EQ(p.extras.at(0).rows_in_flight, 4) << p.toString();
}


// Grouped sums (a position embedding's grad: grad_in summed over the batch, kept per position): the blocks
// walk items of one group's rows, whole groups where there are enough of them to fill the GPU (GPT-2's
// 1024 positions of 8 sequences, ViT's 197 patches of 64 images), slices of a group where they are few
// (4 positions of 4096 sequences); every block as many items as the others, no thread row beyond a
// group's rows, no staging (its copies follow the row order), and the items' shared memory in budget.
TEST(InnerOuterHeuristics, GroupedSumsWalkWholeGroupsOrEvenSlicesOfThem) {
  struct Shape {
    int64_t groups, group_rows, hidden;
  };
  for (DeviceInfo device : {DeviceInfo::h100Sxm(), DeviceInfo::a100(), DeviceInfo::mi300x()}) {
    device.tuning.persistent_staged = 1;
    for (const Shape s : {Shape{1024, 8, 768}, Shape{197, 64, 768}, Shape{4, 4096, 768}, Shape{1024, 1, 64},
                          Shape{37, 3, 96}, Shape{512, 8, 8192}}) {
      InnerOuterProblem problem = layerNormBackward(s.groups * s.group_rows, s.hidden);
      problem.rows.row_data_bytes = 4;
      problem.rows.row_data_min_bytes = 2;
      problem.grouped = {1, s.groups, s.group_rows};
      const InnerOuterParams p = innerOuterHeuristics(device, problem);
      SCOPED_TRACE(p.toString());
      const int64_t ty = p.inner.threads_y;
      EXPECT_FALSE(p.inner.staged);
      EXPECT_LE(ty, std::max<int64_t>(nextPow2(s.group_rows), 1));
      EXPECT_EQ(p.slice_rows % ty, 0);
      EXPECT_GE(p.group_slices * p.slice_rows, s.group_rows);
      EXPECT_LT((p.group_slices - 1) * p.slice_rows, s.group_rows);
      const int64_t items = p.groupItems();
      EXPECT_EQ(items, s.groups * p.group_slices);
      EXPECT_LE(p.blocks, items);
      const int64_t waves = (items + p.blocks - 1) / p.blocks;
      EXPECT_LT(waves * p.blocks - items, p.blocks);  // the last wave's idle blocks: fewer than one wave
      EXPECT_LT(waves * (p.blocks - 1), items);  // one block fewer would need another wave
      const int64_t row_groups = s.groups * ((s.group_rows + ty - 1) / ty);
      EXPECT_GE(items, std::min<int64_t>(device.sm_count, row_groups));
      EXPECT_EQ(p.group_combine_bytes, ty > 1 ? ty * s.hidden * 4 : 0);
      EXPECT_LE(p.group_combine_bytes + p.combine_bytes + 1024, device.smem_per_block_optin);
      // Many grouped sums of doubles, and a large tuned block: the items' sums still fit, in fewer thread
      // rows where they must.
      for (int64_t threads : {256, 1024}) {
        DeviceInfo tuned = device;
        tuned.tuning.block_threads = threads;
        InnerOuterProblem many = problem;
        many.grouped.reductions = 6;
        many.accumulator_bytes = 8;
        const InnerOuterParams q = innerOuterHeuristics(tuned, many);
        const int64_t kept = q.inner.chunks * q.inner.vectorize * (2 + 2 + 6);
        const int64_t row_cache = q.inner.shared_cache
                                      ? kept * q.inner.threads_x * q.inner.threads_y * many.rows.cached_value_bytes
                                      : 0;
        EXPECT_EQ(q.group_combine_bytes, q.inner.threads_y > 1 ? 6 * q.inner.threads_y * s.hidden * 8 : 0);
        EXPECT_LE(row_cache + q.group_combine_bytes + q.combine_bytes + 1024, tuned.smem_per_block_optin)
            << q.toString();
      }
      EXPECT_NE(p.toString().find(fmt::format("sums over the {} rows of each of {} groups", s.group_rows, s.groups)),
                std::string::npos);
      if (s.groups >= 1024) {
        EXPECT_EQ(p.group_slices, 1);
      }
      if (s.groups == 4) {
        EXPECT_GT(p.group_slices, 1);
      }
    }
  }
}
}  // namespace
}  // namespace braze
