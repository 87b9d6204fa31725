// A diagnosis of one communicator, and how it is printed (text for people, JSON for machines).
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace chorus::doctor {

struct Finding {
  // mismatch, lost_rank, hang, failure, healthy
  std::string kind;
  std::string communicator;
  int size = 0;
  std::vector<int> ranksSeen;     // ranks that left a dump (or published a record)
  std::vector<int> ranksMissing;  // ranks of the communicator that did not
  std::string verdict;            // without the leading "verdict: "
  std::vector<std::string> evidence;
  nlohmann::json details = nlohmann::json::object();
};

// The finding a person should read first (a problem before a healthy communicator).
const Finding& mostSevere(const std::vector<Finding>& findings);

// "verdict: ..." first, then the evidence per communicator; problems (unreadable files or
// records) last.
void printText(std::ostream& out, const std::vector<Finding>& findings,
               const std::vector<std::string>& problems);
nlohmann::json toJson(const std::vector<Finding>& findings,
                      const std::vector<std::string>& problems);

// "rank 2", "ranks 0 and 3", "ranks 0, 1, 3".
std::string rankList(const std::vector<int>& ranks);
// "3.2 s"
std::string seconds(double s);

}  // namespace chorus::doctor
