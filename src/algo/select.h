// The automatic algorithm choice: an alpha-beta-gamma cost model per algorithm (cost_model.cc)
// and a pure selector over it, plus the forced choices of Options::algorithm (select.cc,
// algorithm_setting.cc).
#pragma once

#include "common/op_desc.h"

#include <chorus/options.hpp>

#include <optional>
#include <string>
#include <vector>

namespace chorus::algo {

// Where the ranks of a group are, as far as the cost model cares.
struct Placement {
  int hosts = 1;            // distinct hosts
  int perHost = 1;          // most ranks on one host
  bool even = true;         // every host runs the same number of ranks
  bool sharedLocal = true;  // ranks on one host talk through shared memory (not forced to TCP)

  bool layered() const { return hosts > 1 && perHost > 1; }
};

// The cost model's estimate, in seconds, of one collective of `bytes` (all-reduce: the buffer;
// reduce-scatter / all-gather: one rank's block; broadcast: the buffer) over `size` ranks, or
// +infinity when the algorithm does not run that collective or layout.
// wire: an all-reduce's wire format: fewer bytes on the links, a conversion per hop, and +infinity
// for the algorithms that cannot carry it (all but the ring).
double predictSeconds(CollectiveKind kind, AlgorithmId algo, size_t bytes, DataType dtype, int size,
                      const Placement& where, const Tuning& t, size_t segmentBytes,
                      WireFormat wire = WireFormat::kNative);

// The algorithms each collective has, in a fixed order (ties go to the earlier one).
const std::vector<AlgorithmId>& algorithmsFor(CollectiveKind kind);

// Options::algorithm in the library's own terms (algorithm_setting.cc): the frame id of a public
// Algorithm (kNone for kAuto), the only conversion between the two.
AlgorithmId toAlgorithmId(Algorithm a);
// What the setting forces for `kind`: nothing for kAuto.
std::optional<AlgorithmId> forcedAlgorithm(CollectiveKind kind, const AlgorithmSetting& setting);
// Throws Error(kInvalidArgument) when the setting forces an algorithm a collective does not have
// (possible only for a setting assembled in code: parseAlgorithmSetting refuses those).
void validateAlgorithmSetting(const AlgorithmSetting& setting);

struct Candidate {
  AlgorithmId algo;
  double seconds;  // the model's prediction
};
struct Choice {
  AlgorithmId algo = AlgorithmId::kNone;
  bool forced = false;
  bool bothWays = false;  // an all-reduce ring that runs both ways (Tuning::ringBidirectionalBytes)
  std::vector<Candidate> candidates;  // every algorithm the model considered, fastest first
  WireFormat wire = WireFormat::kNative;
  // A forced algorithm that cannot carry the wire format, replaced by the ring (kNone: none).
  AlgorithmId wireFallback = AlgorithmId::kNone;
};

// Pure: the same inputs give the same choice on every rank. A group of one needs no algorithm
// (kNone). Throws Error when a forced choice cannot run here (hier on a flat layout).
// bytes: the data's (f32) bytes also with a wire format.
Choice chooseAlgorithm(CollectiveKind kind, size_t bytes, DataType dtype, int size,
                       const Placement& where, const Options& options,
                       WireFormat wire = WireFormat::kNative);

// One line for CHORUS_DEBUG: "allreduce #3 1048576 B f32 sum on 4 ranks (2 hosts x 2): rhd
// [model: rhd 0.91 ms, ring 1.20 ms, ...]".
std::string explain(const OpDesc& desc, int size, const Placement& where, const Choice& c);

}  // namespace chorus::algo
