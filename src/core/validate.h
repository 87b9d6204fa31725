// Argument checks done before a collective starts: a bad call fails alone, nothing is sent.
#pragma once

#include "common/op_desc.h"

namespace chorus {

// Throws Error(kInvalidArgument) naming the problem: unknown dtype/op, root out of range, null
// buffers with count > 0, sizes that overflow, buffers that overlap other than in place.
void validateCall(const OpDesc& d, const void* in, const void* out, int rank, int size);

}  // namespace chorus

namespace chorus::algo {
struct Args;
}

namespace chorus {

// validateCall for every collective, including those with per-rank counts (a.counts and
// a.recvCounts must hold `size` entries where the collective has them).
void validateArgs(const algo::Args& a, int rank, int size);

}  // namespace chorus
