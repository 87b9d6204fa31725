#include "failure_verdict.h"

#include <chorus/store.hpp>

#include <chrono>
#include <exception>
#include <utility>

#include "diagnose.h"
#include "finding.h"

namespace chorus::launcher {

std::string verdictFromProgress(const std::string& storeUrl, const chorus::AuthOptions& auth,
                                int64_t launchedUs) {
  try {
    auto store = openStore(storeUrl, std::chrono::seconds(1), auth);
    auto records = doctor::readProgress(*store, std::chrono::seconds(1));
    // Only this job's communicators: a store may hold records of an earlier job.
    std::vector<doctor::LiveRecords::Communicator> ours;
    for (auto& c : records.communicators) {
      bool recent = false;
      for (const auto& p : c.records) recent = recent || p.publishedUs >= launchedUs;
      if (recent) ours.push_back(std::move(c));
    }
    if (ours.empty()) return "";
    records.communicators = std::move(ours);
    doctor::LiveOptions options;
    options.quietSeconds = 0;  // a rank already failed: any call still pending is the story
    const auto findings = doctor::diagnoseLive(records, doctor::nowUs(), options);
    if (findings.empty()) return "";
    const doctor::Finding& worst = doctor::mostSevere(findings);
    return worst.kind == "healthy" ? "" : worst.verdict;
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace chorus::launcher
