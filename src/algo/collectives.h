// Entry points: one function per algorithm, and run() which executes an Args on a Group.
#pragma once

#include "algo/group.h"

#include <chorus/options.hpp>

namespace chorus::algo {

// Picks the algorithm for a call. Pure: the same inputs give the same choice on every rank.
// layered: the group spans several hosts with several ranks on some (Topology::layered);
// shared: every peer is reached through shared memory (one host).
AlgorithmId selectAlgorithm(CollectiveKind kind, size_t bytes, int size, const Options& options,
                            bool layered = false, bool shared = false);

// All-reduce with a given algorithm (kNone: a group of one). A wire format other than kNative
// needs the ring (or kNone, which copies: nothing travels).
void allReduceWith(const Group& g, AlgorithmId algo, const void* in, void* out, size_t count,
                   DataType dtype, ReduceOp op, WireFormat wire = WireFormat::kNative);

// Executes one collective (blocking, on the calling thread). Throws chorus::Error.
void run(const Group& g, const Args& args);

void recursiveDoublingAllReduce(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op);
void halvingDoublingAllReduce(const Group& g, const void* in, void* out, size_t count,
                              DataType dtype, ReduceOp op);
void oneShotAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op);
void twoShotAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op);
// Two complementary binary trees, one per half of the buffer (algo/tree_pattern.h), pipelined
// in segments of g.segmentBytes.
void doubleTreeAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                         ReduceOp op);
void hierarchicalAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                           ReduceOp op);
// End of the tree broadcasts: the last rank in root-relative order sends the root an empty
// message at `step`, so that the root too receives something from the call.
void lastRankAcksRoot(const Group& g, int root, uint32_t step);
void chainBroadcast(const Group& g, void* buf, size_t bytes, int root);
// Binomial tree from the root, ceil(log2 N) rounds, each segment forwarded as it arrives.
void binomialBroadcast(const Group& g, void* buf, size_t bytes, int root);
// The root scatters N blocks down a binomial tree, then a ring all-gather (van de Geijn).
void scatterAllGatherBroadcast(const Group& g, void* buf, size_t count, DataType dtype, int root);
// Power-of-two groups only (Error(kInvalidArgument) otherwise, before anything is sent).
// in: N blocks of blockCount elements; out: block g.rank of the reduction.
void halvingReduceScatter(const Group& g, const void* in, void* out, size_t blockCount,
                          DataType dtype, ReduceOp op);
// out: N blocks of blockCount elements, block g.rank already in place.
void doublingAllGather(const Group& g, void* out, size_t blockCount, DataType dtype);
void disseminationBarrier(const Group& g);

// Reduce to `root` over a binomial tree (reduce_to_root.cc); out is written on the root only.
void binomialReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                    ReduceOp op, int root);
// Reduce for large buffers: ring reduce-scatter over balanced blocks, then each rank sends its
// reduced block to the root (reduce_to_root.cc).
void ringGatherReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op, int root);
// Root <-> every rank, one message each (gather_scatter.cc). bytes: one rank's block.
void directGather(const Group& g, const void* in, void* out, size_t bytes, DataType dtype,
                  int root);
void directScatter(const Group& g, const void* in, void* out, size_t bytes, DataType dtype,
                   int root);
// Rings over blocks of counts[q] elements (variable_ring.cc). All-gather-v: out holds every
// block, this rank's already in place. Reduce-scatter-v: in holds every block, out this rank's.
void ringAllGatherV(const Group& g, void* out, const size_t* counts, DataType dtype);
void ringReduceScatterV(const Group& g, const void* in, void* out, const size_t* counts,
                        DataType dtype, ReduceOp op);
// Every rank to every rank in shifted order (all_to_all.cc). in == out is allowed for the
// fixed-size form.
void pairwiseAllToAll(const Group& g, const void* in, void* out, size_t blockBytes, DataType dtype);
void pairwiseAllToAllV(const Group& g, const void* in, const size_t* sendCounts, void* out,
                       const size_t* recvCounts, DataType dtype);

}  // namespace chorus::algo
