// The Replica's DiLoCo outer steps and the divergence reports shared with LocalSgd.
#include "dp/replica_impl.h"

#include <algorithm>
#include <iostream>
#include <sstream>

namespace chorus::dp {
namespace {

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

void Replica::Impl::reportDivergence(double d, const std::string& context) {
  current.divergence = d;
  std::ostringstream line;
  line << "chorus dp: step " << steps << " divergence " << d;
  if (opt.log) {
    opt.log(line.str());
  } else if (comm->rank() == 0) {
    std::cerr << line.str() << "\n";
  }
  if (opt.divergenceLimit && d > *opt.divergenceLimit) {
    std::ostringstream m;
    m << context << ": divergence " << d << " exceeds divergenceLimit " << *opt.divergenceLimit;
    throw Error(ErrorCode::kMismatch, m.str());
  }
}

void Replica::Impl::dilocoStep() {
  const std::vector<int> due = diloco->dueAt(steps);
  if (due.empty()) return;
  auto outerContext = [&](int f) {
    return "dp step " + std::to_string(steps) + ", diloco outer step (fragment " +
           std::to_string(f) + " of " + std::to_string(opt.diloco.fragments) + ")";
  };
  for (int f : due) {
    current.bytesReduced += withContext(outerContext(f), [&] { return diloco->reduce(*comm, f); });
    current.buckets += 1;
  }
  // The divergence before the sync, from what the sync already brought (each rank's
  // pseudo-gradient against the average: its parameters against the average parameters) and
  // one scalar: when a multiple of checkEvery lies among the H steps that end here, so each
  // fragment about every checkEvery steps. Reported (and divergenceLimit enforced) before the
  // outer step changes the parameters.
  const int64_t every = opt.checkEvery, h = opt.diloco.syncEvery;
  if (every > 0 && floorDiv(steps, every) > floorDiv(steps - h, every)) {
    const std::string context = "dp step " + std::to_string(steps) + ", consistency check";
    double local = 0;
    for (int f : due) local = std::max(local, diloco->deviation(f));
    const double d = withContext(context, [&] { return divergenceFromDeviations(*comm, local); });
    reportDivergence(d, context);
  }
  for (int f : due) diloco->apply(f);
}

}  // namespace chorus::dp
