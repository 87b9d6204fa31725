// Pipelined ring: reduce-scatter, all-gather, or both (= all-reduce), in segments, so that
// sending, receiving and reducing overlap.
#pragma once

#include "algo/group.h"
#include "reduce/reduce.h"

namespace chorus::algo {

// The buffers are seen as size() blocks (balancedBlock of totalCount, or equal blocks of
// blockCount when blockCount != 0).
struct RingSpec {
  const uint8_t* in = nullptr;  // reduce phase: every rank's contribution, all blocks
  uint8_t* acc = nullptr;       // where partial sums and gathered blocks are written
  uint8_t* own = nullptr;       // where this rank's fully reduced block goes
  size_t totalCount = 0;        // elements over all blocks
  size_t blockCount = 0;        // if non-zero, every block has exactly this many elements
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  bool reduce = true;  // run the reduce-scatter phase
  bool gather = true;  // run the all-gather phase
};

void ringRun(const Group& g, const RingSpec& spec);

}  // namespace chorus::algo
