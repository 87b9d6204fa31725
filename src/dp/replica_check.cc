// The consistency check every checkEvery steps: bit-identical replicas (Sync, Delayed) or the
// divergence between them (LocalSgd).
#include "dp/replica_impl.h"

#include <sstream>

namespace chorus::dp {

std::vector<Tensor> Replica::Impl::values() const {
  std::vector<Tensor> t;
  for (const Param& p : params) t.push_back({p.value, p.count});
  return t;
}

void Replica::Impl::check() {
  const std::string context = "dp step " + std::to_string(steps) + ", consistency check";
  if (opt.mode == Mode::kLocalSgd) {
    // Right after an averaging the replicas should hold the same bits: a hash shows whether
    // they do without sending the model.
    if (steps % opt.localSgdPeriod == 0 && withContext(context, [&] {
          return dp::ranksDifferingFromRoot(*comm, hashParameters(values())).empty();
        })) {
      reportDivergence(0, context);
      return;
    }
    const double d = withContext(context, [&] { return measureDivergence(*comm, values()); });
    reportDivergence(d, context);
    return;
  }
  const auto differ = withContext(
      context, [&] { return dp::ranksDifferingFromRoot(*comm, hashParameters(values())); });
  if (differ.empty()) return;
  std::ostringstream m;
  m << context << ": parameters on rank(s) ";
  for (size_t i = 0; i < differ.size(); ++i) m << (i ? ", " : "") << differ[i];
  m << " differ from rank 0's (replicas must be bit-identical in this mode)";
  throw Error(ErrorCode::kMismatch, m.str());
}

}  // namespace chorus::dp
