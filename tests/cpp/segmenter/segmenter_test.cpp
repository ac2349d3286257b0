// Segmentation and bookending: how many kernels and alias segments each pattern becomes, why cuts
// happen, and that every segmented run equals the reference evaluator.
#include "fusions/layer_norm.h"
#include "fusions/plan_util.h"
#include "fusions/rope.h"
#include "fusions/transformer_block.h"
#include "ir/ops.h"
#include "passes/mark_aliases_prepare.h"
#include "scheduler/registry.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using testing::expectMatchesReference;
using testing::randomInputs;

std::vector<Val*> ints(Fusion& f, const std::vector<int64_t>& v) {
  std::vector<Val*> out;
  for (int64_t x : v) out.push_back(f.constant(x));
  return out;
}

const Segment& onlyKernel(const SegmentedFusion& plan) {
  EXPECT_EQ(plan.kernelCount(), 1) << plan.toString();
  for (const Segment& s : plan.segments) {
    if (s.kind == SegmentKind::Kernel) return s;
  }
  throw std::runtime_error("no kernel segment");
}

TEST(Segmenter, OutputsThatViewAnInputAreAliasesWithNoKernel) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    TensorView* b = defineTensor({1, -1}, {std::nullopt, true}, DataType::Float);
    f.addOutput(reshape(x, ints(f, {-1, 8})));
    f.addOutput(permute(x, {2, 0, 1}));
    f.addOutput(slice(x, ints(f, {0, 1, 2}), ints(f, {4, 5, 8}), ints(f, {1, 2, 1})));
    f.addOutput(expand(b, ints(f, {7, -1})));
    f.addOutput(squeeze(b, {0}));
  }
  const auto inputs = randomInputs(f, 1, {{4, 6, 8}, {1, 5}});
  const SegmentedFusion plan = expectMatchesReference(f, inputs);
  EXPECT_EQ(plan.kernelCount(), 0) << plan.toString();
  EXPECT_EQ(plan.aliasCount(), 5);
  const auto outputs = testing::runPlanOnReference(f, inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(testing::asTensor(outputs[i]).sharesStorageWith(testing::asTensor(inputs[i < 3 ? 0 : 1])))
        << "output " << i << " should be a view of its input";
  }
}

TEST(Segmenter, AnOutputReshapeThatCannotBeAViewIsCopiedByAKernel) {
  Fusion f;
  {
    FusionGuard g(&f);
    // A column-major input: merging its dims needs a copy.
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float, false, {0, 1});
    f.addOutput(reshape(x, ints(f, {-1})));
  }
  HostTensor x = testing::randomTensor(DataType::Float, {6, 4}, 3);
  HostTensor transposed = x.view({4, 6}, {1, 4}, 0);
  const SegmentedFusion plan = expectMatchesReference(f, {transposed});
  const Segment& kernel = onlyKernel(plan);
  EXPECT_EQ(kernel.scheduler, SchedulerKind::Transpose);  // copying a column-major input to row-major
  ASSERT_FALSE(kernel.refusals.empty());
  EXPECT_NE(kernel.refusals[0].second.find("not contiguous"), std::string::npos) << plan.toString();
}

TEST(Segmenter, LitGptRopeIsOneKernelAndVIsAView) {
  Fusion f;
  testing::defineLitGptQkvSplitRope(f, {.batch = 2, .seq = 6, .heads = 4, .groups = 4, .head = 8, .rope_n_elem = 8});
  const auto inputs = randomInputs(f, 7);
  const SegmentedFusion plan = expectMatchesReference(f, inputs);
  const Segment& kernel = onlyKernel(plan);
  EXPECT_EQ(kernel.scheduler, SchedulerKind::Pointwise);
  EXPECT_EQ(kernel.outputs.size(), 2u);  // q and k
  const Segment* v = plan.producerOf(plan.fusion->outputs()[2]);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind, SegmentKind::Alias);
  const auto outputs = testing::runPlanOnReference(f, inputs);
  EXPECT_TRUE(testing::asTensor(outputs[2]).sharesStorageWith(testing::asTensor(inputs[0])));
}

TEST(Segmenter, LitGptRopeWithGroupedQueryAttentionIsOneKernel) {
  // k and v are expanded to n_head heads, then reshaped: that reshape cannot be a view, so v is
  // written by the same kernel as q and k (horizontal fusion), not by a kernel of its own.
  Fusion f;
  testing::defineLitGptQkvSplitRope(f, {.batch = 1, .seq = 5, .heads = 8, .groups = 2, .head = 8, .rope_n_elem = 4});
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 11));
  const Segment& kernel = onlyKernel(plan);
  EXPECT_EQ(kernel.outputs.size(), 3u) << plan.toString();
  EXPECT_EQ(plan.aliasCount(), 0);
}

TEST(Segmenter, SeedLayerNormIsOneInnerPersistentKernel) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 3, .hidden = 40});
  const auto inputs = randomInputs(f, 5, {{2, 3, 40}, {40}, {40}});
  const SegmentedFusion plan = expectMatchesReference(f, inputs);
  EXPECT_EQ(onlyKernel(plan).scheduler, SchedulerKind::InnerPersistent);
  EXPECT_EQ(plan.aliasCount(), 0);
  // The cost model keeps the weight's broadcast in the kernel: same bytes, same vector width.
  for (const BookendDecision& d : plan.bookending.decisions) {
    EXPECT_FALSE(d.bookended) << d.chain << ": " << d.reason;
  }
}

TEST(Segmenter, ForcedBookendingFromInputsMakesWeightViewsAndStillOneKernel) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 3, .hidden = 40});
  const auto inputs = randomInputs(f, 5, {{2, 3, 40}, {40}, {40}});
  const SegmentedFusion plan = expectMatchesReference(f, inputs, {.bookend = BookendPolicy::Both});
  EXPECT_EQ(onlyKernel(plan).scheduler, SchedulerKind::InnerPersistent);
  EXPECT_EQ(plan.aliasCount(), 2) << plan.toString();  // weight and bias broadcasts
  const SegmentedFusion none = expectMatchesReference(f, inputs, {.bookend = BookendPolicy::None});
  EXPECT_EQ(none.kernelCount(), 1);
  EXPECT_EQ(none.aliasCount(), 0);
}

TEST(Segmenter, APlanReadsASharedFusionAsDefinedUnlessBookendingCutsIt) {
  // A FusionCache's fusion is shared: planning it copies nothing unless a pass edits it, and an edit
  // (a segment_set) goes to a copy, leaving the caller's fusion as defined.
  auto layerNorm = std::make_shared<Fusion>();
  testing::defineLayerNorm(*layerNorm, {.batch = 2, .seq = 3, .hidden = 40});
  const std::string defined = layerNorm->toString();
  const auto inputs = randomInputs(*layerNorm, 5, {{2, 3, 40}, {40}, {40}});
  EXPECT_FALSE(bookendingMayEdit(*layerNorm, BookendPolicy::Auto));
  EXPECT_EQ(planSegments(*layerNorm, inputs).fusion.get(), layerNorm.get());
  EXPECT_TRUE(bookendingMayEdit(*layerNorm, BookendPolicy::Both));  // the weight and bias broadcasts
  const SegmentedFusion both = planSegments(*layerNorm, inputs, {.bookend = BookendPolicy::Both});
  EXPECT_NE(both.fusion.get(), layerNorm.get());
  EXPECT_EQ(both.aliasCount(), 2) << both.toString();
  EXPECT_EQ(layerNorm->toString(), defined);
  // Not shared (a fusion on the stack): always a copy, which the plan owns.
  Fusion local;
  testing::defineLayerNorm(local, {.batch = 2, .seq = 3, .hidden = 40});
  EXPECT_NE(planSegments(local, inputs).fusion.get(), &local);

  auto permuted = std::make_shared<Fusion>();
  {
    FusionGuard g(permuted.get());
    TensorView* x = defineTensor({2048, 4096}, {true, true}, DataType::Float);
    permuted->addOutput(permute(unaryOp(OpKind::Exp, x)->asTensor(), {1, 0}));
  }
  const std::string permuted_defined = permuted->toString();
  EXPECT_TRUE(bookendingMayEdit(*permuted, BookendPolicy::Auto));  // a view chain ends at the output
  EXPECT_FALSE(bookendingMayEdit(*permuted, BookendPolicy::None));
  const SegmentedFusion cut = planSegments(*permuted, {HostTensor::empty(DataType::Float, {2048, 4096})});
  EXPECT_NE(cut.fusion.get(), permuted.get());
  EXPECT_EQ(cut.aliasCount(), 1) << cut.toString();
  EXPECT_EQ(permuted->toString(), permuted_defined);
}

TEST(Segmenter, ForcedBookendingNeverReadsOneInputTwiceInAKernel) {
  // Two overlapping views of x feed one kernel: bookending both would read x twice.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({4, 6}, {true, true}, DataType::Float);
    TensorView* t = permute(x, {1, 0});
    TensorView* r = reshape(x, ints(f, {6, 4}));
    f.addOutput(add(t, r));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 2), {.bookend = BookendPolicy::Both});
  EXPECT_EQ(plan.aliasCount(), 0) << plan.toString();
  for (const BookendDecision& d : plan.bookending.decisions) {
    EXPECT_NE(d.reason.find("twice"), std::string::npos) << d.reason;
  }
}

TEST(Segmenter, ForcedBookendingAllowsDisjointSlicesOfOneInput) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({4, 8}, {true, true}, DataType::Float);
    TensorView* lo = slice(x, ints(f, {0, 0}), ints(f, {4, 4}), ints(f, {1, 1}));
    TensorView* hi = slice(x, ints(f, {0, 4}), ints(f, {4, 8}), ints(f, {1, 1}));
    f.addOutput(mul(lo, hi));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 4), {.bookend = BookendPolicy::Both});
  EXPECT_EQ(plan.kernelCount(), 1);
  ASSERT_EQ(plan.aliasCount(), 1) << plan.toString();  // one alias segment makes both views
  EXPECT_EQ(plan.segments[0].outputs.size(), 2u);
}

TEST(Segmenter, AViewThatFeedsComputeAndAnOutputStaysInTheKernel) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* r = reshape(unaryOp(OpKind::Exp, x)->asTensor(), ints(f, {-1}));
    f.addOutput(r);
    f.addOutput(unaryOp(OpKind::Log, r));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 3, {{5, 7}}));
  EXPECT_EQ(plan.segments.size(), 1u) << plan.toString();
  EXPECT_EQ(onlyKernel(plan).outputs.size(), 2u);
}

TEST(Segmenter, ATensorReadOnlyForItsShapeIsNotComputed) {
  // randn_like(cast(b)) as the frontend records it: normal over size(cast(b), d). No kernel computes the
  // cast; its sizes come from the bound shapes (a kernel with no outputs would launch an empty grid).
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* c = cast(b, DataType::Float)->asTensor();
    TensorView* noise = normal(f.constant(0.0), f.constant(1.0), shape(c), f.constant(int64_t{7}),
                               f.constant(int64_t{0}), DataType::Float);
    f.addOutput(add(x, noise));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 3, {{5, 7}, {5, 7}}));
  EXPECT_EQ(plan.segments.size(), 1u) << plan.toString();
  const Segment& kernel = onlyKernel(plan);
  EXPECT_EQ(kernel.outputs.size(), 1u);
  for (const Expr* e : kernel.exprs) EXPECT_NE(e->kind(), OpKind::CastOp) << plan.toString();
}

TEST(Segmenter, ABranchingInputChainIsOneKernelPlusAView) {
  // reshape -> reshape -> compute, and the middle reshape is also an output.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* r1 = reshape(x, ints(f, {-1}));
    TensorView* r2 = reshape(r1, ints(f, {7, -1}));
    f.addOutput(r1);
    f.addOutput(unaryOp(OpKind::Exp, r2));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 3, {{5, 7}}));
  EXPECT_EQ(plan.kernelCount(), 1) << plan.toString();
  EXPECT_EQ(plan.aliasCount(), 1);
}

TEST(Segmenter, CostModelBookendsOutputPermutesAndExpandsButNotReshapesOrSlices) {
  // Sizes where traffic, not host time, decides; explain only (views are checked by other tests).
  auto planFor = [](std::vector<int64_t> shape, auto&& meta) {
    Fusion f;
    {
      FusionGuard g(&f);
      std::vector<std::optional<bool>> contiguity;
      for (int64_t s : shape) contiguity.push_back(s == 1 ? std::nullopt : std::optional<bool>(true));
      TensorView* x = defineTensor(shape, contiguity, DataType::Float);
      f.addOutput(meta(f, unaryOp(OpKind::Exp, x)->asTensor()));
    }
    return planSegments(f, {HostTensor::empty(DataType::Float, shape)});
  };
  const auto permuted = planFor({2048, 4096}, [](Fusion&, TensorView* t) { return permute(t, {1, 0}); });
  EXPECT_EQ(permuted.aliasCount(), 1) << permuted.toString();  // a transposed write loses vector stores
  const auto reshaped = planFor({2048, 4096}, [](Fusion& f, TensorView* t) { return reshape(t, ints(f, {4096, 2048})); });
  EXPECT_EQ(reshaped.aliasCount(), 0) << reshaped.toString();  // same bytes, same width: a view only adds host time
  const auto sliced = planFor({2048, 4096}, [](Fusion& f, TensorView* t) {
    return slice(t, ints(f, {0, 0}), ints(f, {8, 4096}), ints(f, {1, 1}));
  });
  EXPECT_EQ(sliced.aliasCount(), 0) << sliced.toString();  // the kernel writes 8 rows instead of 2048
  const auto expanded = planFor({1, 4096}, [](Fusion& f, TensorView* t) { return expand(t, ints(f, {4096, 4096})); });
  EXPECT_EQ(expanded.aliasCount(), 1) << expanded.toString();  // 16 KiB and a view instead of 64 MiB
  for (const auto* plan : {&permuted, &reshaped, &sliced, &expanded}) EXPECT_EQ(plan->kernelCount(), 1);
}

TEST(Segmenter, SmallOutputChainsStayInTheKernel) {
  // At 64 KiB the host time of an alias segment outweighs the traffic a permuted write loses.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({64, 256}, {true, true}, DataType::Float);
    f.addOutput(permute(unaryOp(OpKind::Exp, x)->asTensor(), {1, 0}));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 9));
  EXPECT_EQ(plan.aliasCount(), 0) << plan.toString();
  EXPECT_EQ(onlyKernel(plan).scheduler, SchedulerKind::Transpose);
}

TEST(Segmenter, OuterReductionBroadcastBackIsTwoKernelsWithAReason) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* mean = reduce(OpKind::Sum, x, {0}, /*keepdim=*/true);
    f.addOutput(sub(x, expand(mean, ints(f, {9, 5}))));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{9, 5}}));
  EXPECT_EQ(plan.kernelCount(), 2) << plan.toString();
  ASSERT_EQ(plan.edges.size(), 1u);
  EXPECT_EQ(plan.edges[0].reason, CutReason::SchedulerRefused);
  EXPECT_NE(plan.edges[0].detail.find("not the innermost"), std::string::npos) << plan.edges[0].detail;
}

TEST(Segmenter, SegmentSetIsAHardCut) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* e = segmentSet(unaryOp(OpKind::Exp, x)->asTensor());
    f.addOutput(unaryOp(OpKind::Log, e));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{33}}));
  EXPECT_EQ(plan.kernelCount(), 2) << plan.toString();
  bool cut = false;
  for (const SegmentEdge& e : plan.edges) cut = cut || e.reason == CutReason::SegmentSet;
  EXPECT_TRUE(cut) << plan.toString();
}

TEST(Segmenter, SiblingReductionsOfOneInputShareAKernel) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(reduce(OpKind::Sum, x, {1}));
    f.addOutput(reduce(OpKind::Max, x, {1}));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{3, 17}}));
  EXPECT_EQ(onlyKernel(plan).scheduler, SchedulerKind::Reduction);
}

TEST(Segmenter, MatmulHasNoSchedulerYetButStillRunsOnTheReference) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(unaryOp(OpKind::Relu, matmul(a, b)));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{3, 4}, {4, 5}}));
  ASSERT_GE(plan.segments.size(), 2u) << plan.toString();
  EXPECT_FALSE(plan.segments[0].scheduler.has_value());
}

TEST(Segmenter, NeverMergesAcrossAPathThroughAnotherSegment) {
  // exp feeds the matmul (no scheduler) and the add; the add also reads the matmul. Merging exp with
  // the add would make the matmul both a producer and a consumer of that one kernel.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* w = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* e = unaryOp(OpKind::Exp, x)->asTensor();
    f.addOutput(add(e, matmul(e, w)));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{4, 4}, {4, 4}}));
  EXPECT_EQ(plan.segments.size(), 3u) << plan.toString();
  bool cycle = false;
  for (const SegmentEdge& e : plan.edges) cycle = cycle || e.reason == CutReason::WouldCreateCycle;
  EXPECT_TRUE(cycle) << plan.toString();
}

TEST(Segmenter, SiblingMergesNeverCloseALongCycle) {
  // Merging siblings makes groups span other groups' positions; the cycle check must still find
  // the path p3 -> p4 -> {p0, p5} -> p1 -> p2 before merging p2 with p3 (both read C).
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor({-1}, {true}, DataType::Float);
    TensorView* c = defineTensor({-1}, {true}, DataType::Float);
    TensorView* s = segmentSet(unaryOp(OpKind::Neg, a)->asTensor());
    f.addOutput(add(s, c));
    TensorView* x2 = segmentSet(add(c, c)->asTensor());
    f.addOutput(add(a, x2));
  }
  expectMatchesReference(f, randomInputs(f, 1, {{6}, {6}}));
}

TEST(Segmenter, ForcedBookendingOfAViewReadTwiceByOneOp) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* v = permute(x, {1, 0});
    f.addOutput(mul(v, v));
  }
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 1, {{3, 5}}), {.bookend = BookendPolicy::Both});
  EXPECT_EQ(plan.kernelCount(), 1);
  EXPECT_EQ(plan.aliasCount(), 1) << plan.toString();
}

TEST(Segmenter, TransformerBlocksMatchTheReferenceAndStayFewKernels) {
  Fusion f;
  testing::defineTransformerBlocks(f, {}, 3);
  const SegmentedFusion plan = expectMatchesReference(f, randomInputs(f, 13));
  EXPECT_LE(plan.kernelCount(), 4) << plan.toString();  // about one kernel per block
}

TEST(Segmenter, SchedulersGiveTheSameVerdictWithoutReasons) {
  // Merge attempts ask the schedulers without reasons (CandidateFacts::reasons): only the texts may
  // differ. Checked on every segment of a plan and on the union of the two ends of every cut.
  Fusion f;
  testing::defineTransformerBlocks(f, {}, 2);
  {
    // The blocks are one row kernel: a linear after them (a matmul kernel of its own) makes a cut to check.
    FusionGuard guard(&f);
    const testing::BlockShape shape;
    const int64_t rows = shape.batch * shape.seq, hidden = shape.heads * shape.head;
    TensorView* weight = defineTensor({hidden, 24}, {true, true}, DataType::BFloat16);
    f.addOutput(matmul(reshape(f.outputs().back()->asTensor(), {f.constant(rows), f.constant(hidden)}), weight));
  }
  const SegmentedFusion plan = planSegments(f, randomInputs(f, 13));
  auto same = [&](const Candidate& c) {
    const SchedulerChoice told = chooseScheduler(c, plan.bound, true);
    const SchedulerChoice quiet = chooseScheduler(c, plan.bound, false);
    EXPECT_EQ(told.kind, quiet.kind);
    ASSERT_EQ(told.refusals.size(), quiet.refusals.size());
    for (size_t i = 0; i < told.refusals.size(); ++i) {
      EXPECT_EQ(told.refusals[i].first, quiet.refusals[i].first);
      EXPECT_FALSE(quiet.refusals[i].second.empty());
    }
  };
  for (const Segment& s : plan.segments) same({s.exprs, s.inputs, s.outputs});
  ASSERT_FALSE(plan.edges.empty()) << plan.toString();
  for (const SegmentEdge& e : plan.edges) {
    const Segment& a = plan.segments[e.producer];
    const Segment& b = plan.segments[e.consumer];
    Candidate joined{a.exprs, a.inputs, a.outputs};
    joined.exprs.insert(joined.exprs.end(), b.exprs.begin(), b.exprs.end());
    for (const Val* in : b.inputs) {
      if (std::find(a.outputs.begin(), a.outputs.end(), in) == a.outputs.end()) joined.inputs.push_back(in);
    }
    joined.outputs.insert(joined.outputs.end(), b.outputs.begin(), b.outputs.end());
    same(joined);
  }
}

TEST(Segmenter, PlansAreDeterministicAndPrintable) {
  Fusion f;
  testing::defineLitGptQkvSplitRope(f, {.batch = 1, .seq = 4, .heads = 4, .groups = 2, .head = 8, .rope_n_elem = 8});
  const auto inputs = randomInputs(f, 3);
  const SegmentedFusion a = planSegments(f, inputs);
  const SegmentedFusion b = planSegments(Fusion(f), inputs);
  EXPECT_EQ(a.toString(), b.toString());
  EXPECT_NE(a.toString().find("pointwise"), std::string::npos);
  EXPECT_NE(a.toDot().find("digraph plan"), std::string::npos);
}

TEST(Segmenter, OddAndUnitSizesAndStridedInputsMatchTheReference) {
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{1, 1, 1}, {1, 3, 7}, {5, 1, 13}, {3, 2, 1}}) {
    Fusion f;
    testing::defineLayerNorm(f, {.batch = shape[0], .seq = shape[1], .hidden = shape[2]});
    SCOPED_TRACE(fmt::format("[{}]", fmt::join(shape, ", ")));
    const auto inputs = randomInputs(f, 17, {shape, {shape[2]}, {shape[2]}});
    const SegmentedFusion plan = expectMatchesReference(f, inputs);
    EXPECT_EQ(plan.kernelCount(), 1) << plan.toString();
  }
}

TEST(Segmenter, MisalignedAndPaddedInputsMatchTheReference) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {false, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1}, {true}, DataType::BFloat16);
    Val* scaled = mul(x, broadcastInDim(w, {size(x, 0), size(x, 1)}, {1}));
    TensorView* s = reduce(OpKind::Sum, scaled->asTensor(), {1}, /*keepdim=*/true);
    f.addOutput(sub(scaled, expand(s, {size(x, 0), size(x, 1)})));
    f.addOutput(permute(x, {1, 0}));
  }
  HostTensor wide = testing::randomTensor(DataType::BFloat16, {5, 14}, 4);
  const HostTensor padded = wide.view({5, 11}, {14, 1}, 1);  // rows of a wider buffer, offset by one element
  const SegmentedFusion plan =
      expectMatchesReference(f, {padded, testing::randomTensor(DataType::BFloat16, {11}, 5)});
  EXPECT_EQ(plan.kernelCount(), 1) << plan.toString();
  EXPECT_EQ(plan.aliasCount(), 1);
}

}  // namespace
}  // namespace braze
