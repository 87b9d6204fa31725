#include "finding.h"

#include <array>
#include <cstdio>

namespace chorus::doctor {

namespace {

int severity(const std::string& kind) {
  static constexpr std::array<const char*, 5> kOrder = {"mismatch", "lost_rank", "hang", "failure",
                                                        "healthy"};
  for (size_t i = 0; i < kOrder.size(); ++i) {
    if (kind == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(kOrder.size());
}

std::string header(const Finding& f) {
  std::string s = "communicator " + f.communicator + " (" + std::to_string(f.size) + " ranks";
  if (f.ranksMissing.empty()) {
    s += ", all seen)";
  } else {
    s += "; " + std::to_string(f.ranksSeen.size()) + " of " + std::to_string(f.size) +
         " seen, nothing from " + rankList(f.ranksMissing) + ")";
  }
  return s + ": " + f.kind;
}

}  // namespace

const Finding& mostSevere(const std::vector<Finding>& findings) {
  const Finding* worst = &findings.front();
  for (const auto& f : findings) {
    if (severity(f.kind) < severity(worst->kind)) worst = &f;
  }
  return *worst;
}

void printText(std::ostream& out, const std::vector<Finding>& findings,
               const std::vector<std::string>& problems) {
  const Finding& worst = mostSevere(findings);
  out << "verdict: " << worst.verdict;
  if (findings.size() > 1) out << " (communicator " << worst.communicator << ")";
  out << "\n";
  for (const auto& f : findings) {
    out << "\n" << header(f) << "\n";
    if (findings.size() > 1 && &f != &worst) out << "  verdict: " << f.verdict << "\n";
    for (const auto& line : f.evidence) out << "  " << line << "\n";
  }
  if (!problems.empty()) {
    out << "\nnot read:\n";
    for (const auto& p : problems) out << "  " << p << "\n";
  }
}

nlohmann::json toJson(const std::vector<Finding>& findings,
                      const std::vector<std::string>& problems) {
  const Finding& worst = mostSevere(findings);
  nlohmann::json j;
  j["verdict"] = worst.verdict;
  j["kind"] = worst.kind;
  j["communicator"] = worst.communicator;
  j["communicators"] = nlohmann::json::array();
  for (const auto& f : findings) {
    j["communicators"].push_back({{"communicator", f.communicator},
                                  {"size", f.size},
                                  {"kind", f.kind},
                                  {"verdict", f.verdict},
                                  {"ranks_seen", f.ranksSeen},
                                  {"ranks_missing", f.ranksMissing},
                                  {"evidence", f.evidence},
                                  {"details", f.details}});
  }
  j["problems"] = problems;
  return j;
}

std::string rankList(const std::vector<int>& ranks) {
  if (ranks.empty()) return "no rank";
  if (ranks.size() == 1) return "rank " + std::to_string(ranks[0]);
  std::string s = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ranks.size() == 2 ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", s);
  return buffer;
}

}  // namespace chorus::doctor
