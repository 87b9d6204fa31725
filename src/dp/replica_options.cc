// The checks of dp::Options made when a Replica is constructed.
#include "dp/replica_impl.h"

#include <cmath>

namespace chorus::dp {

namespace {

void validateCompression(const Options& o) {
  const CompressionOptions& c = o.compression;
  if (c.kind == Compression::kNone) return;
  const std::string name = toString(c);
  if (o.mode == Mode::kLocalSgd || o.mode == Mode::kDiLoCo) {
    throw invalid("compression " + name +
                  " applies to gradients: Mode::kSync or kDelayed only (LocalSgd and DiLoCo send "
                  "no gradients)");
  }
  if (c.kind == Compression::kPowerSgd) {
    if (c.powerSgdRank < 1) throw invalid("compression.powerSgdRank must be >= 1");
    if (o.mode != Mode::kSync) throw invalid("compression " + name + " needs Mode::kSync");
  }
}

void validateDiLoCo(const DiLoCoOptions& d) {
  if (d.syncEvery < 1) throw invalid("diloco.syncEvery must be >= 1");
  if (d.fragments < 1) throw invalid("diloco.fragments must be >= 1");
  if (!(d.outerLr > 0) || !std::isfinite(d.outerLr)) throw invalid("diloco.outerLr must be > 0");
  if (!(d.outerMomentum >= 0 && d.outerMomentum < 1))
    throw invalid("diloco.outerMomentum must be in [0, 1)");
}

}  // namespace

void validateOptions(const Options& o, bool owned) {
  if (o.accumulationSteps < 1) throw invalid("accumulationSteps must be >= 1");
  validateCompression(o);
  if (o.mode == Mode::kDiLoCo) validateDiLoCo(o.diloco);
  if (o.localSgdPeriod < 1) throw invalid("localSgdPeriod must be >= 1");
  if (o.minBuckets < 0) throw invalid("minBuckets must be >= 0");
  if (o.checkEvery < 0) throw invalid("checkEvery must be >= 0");
  if (!o.elastic.enabled) return;
  if (!owned) throw invalid("elastic mode needs a Replica that owns its communicator");
  // Delayed keeps a step in flight across steps; LocalSgd and DiLoCo have no identical replicas
  // to copy from between syncs.
  if (o.mode != Mode::kSync) throw invalid("elastic mode supports Mode::kSync only");
  if (o.elastic.admitJoinersEvery < 0) throw invalid("elastic.admitJoinersEvery must be >= 0");
  if (o.elastic.minRanks < 1) throw invalid("elastic.minRanks must be >= 1");
}

}  // namespace chorus::dp
