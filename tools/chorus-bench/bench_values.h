// The values chorus-bench sends and the results it expects back, for the #wrong column: small
// integers, exact in every dtype and every summation order.
#pragma once

#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>

namespace chorus::bench {

// Rank `from`'s element i: (i + from) % 3 + 1.
double filled(size_t i, int from);

// Writes elements 0..count-1 of rank `rank`'s input at p.
void fillInput(uint8_t* p, size_t count, DataType t, int rank);

// The element at p, as a double.
double valueAt(const uint8_t* p, DataType t);

// Element i of the reduction of fillInput over n ranks (before avg divides).
double expectedReduced(size_t i, int n, ReduceOp op);

bool isInteger(DataType t);

}  // namespace chorus::bench
