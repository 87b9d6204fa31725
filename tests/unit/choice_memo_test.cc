// The communicator's memo of algorithm choices (core/choice_memo.h): it answers only for the
// exact shape it was given, forgets nothing it must not, and refuses shapes it cannot key.
#include "core/choice_memo.h"

#include <gtest/gtest.h>

namespace chorus {
namespace {

TEST(ChoiceMemo, AnswersOnlyForTheShapeItWasGiven) {
  ChoiceMemo memo;
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, 8, DataType::kF32, WireFormat::kNative));
  memo.remember(CollectiveKind::kAllReduce, 8, DataType::kF32, WireFormat::kNative,
                AlgorithmId::kOneShot);
  auto hit = memo.find(CollectiveKind::kAllReduce, 8, DataType::kF32, WireFormat::kNative);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, AlgorithmId::kOneShot);
  // Any other part of the shape: no answer.
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, 12, DataType::kF32, WireFormat::kNative));
  EXPECT_FALSE(memo.find(CollectiveKind::kAllGather, 8, DataType::kF32, WireFormat::kNative));
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, 8, DataType::kF64, WireFormat::kNative));
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, 8, DataType::kF32, WireFormat::kBf16));
  // A zero-byte call is a shape like any other.
  memo.remember(CollectiveKind::kAllReduce, 0, DataType::kF32, WireFormat::kNative,
                AlgorithmId::kRing);
  EXPECT_EQ(*memo.find(CollectiveKind::kAllReduce, 0, DataType::kF32, WireFormat::kNative),
            AlgorithmId::kRing);
}

TEST(ChoiceMemo, ManyShapesNeverAnswerWrongly) {
  ChoiceMemo memo;
  auto algoOf = [](uint64_t bytes) {
    return bytes % 3 == 0   ? AlgorithmId::kRing
           : bytes % 3 == 1 ? AlgorithmId::kRecursiveDoubling
                            : AlgorithmId::kTwoShot;
  };
  for (uint64_t b = 1; b < 5000; b += 7) {
    memo.remember(CollectiveKind::kAllReduce, b, DataType::kF32, WireFormat::kNative, algoOf(b));
  }
  int hits = 0;
  for (uint64_t b = 1; b < 5000; b += 7) {
    if (auto a = memo.find(CollectiveKind::kAllReduce, b, DataType::kF32, WireFormat::kNative)) {
      EXPECT_EQ(*a, algoOf(b)) << b;
      ++hits;
    }
  }
  EXPECT_GT(hits, 0);  // the last shapes remembered are still there
  EXPECT_LE(hits, 8);  // a fixed number of slots
}

TEST(ChoiceMemo, CallsOfATebibyteOrMoreAreNotKept) {
  ChoiceMemo memo;
  const uint64_t huge = uint64_t{1} << 40;
  memo.remember(CollectiveKind::kAllReduce, huge, DataType::kU8, WireFormat::kNative,
                AlgorithmId::kRing);
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, huge, DataType::kU8, WireFormat::kNative));
  // Its low bits must not alias a small shape either.
  EXPECT_FALSE(memo.find(CollectiveKind::kAllReduce, 0, DataType::kU8, WireFormat::kNative));
}

}  // namespace
}  // namespace chorus
