#include "core/slurm_env.h"

#include <chorus/error.hpp>

#include <cctype>
#include <string_view>

namespace chorus::slurm {

std::string firstHost(const std::string& hostList) {
  auto malformed = [&] {
    return Error(ErrorCode::kInvalidArgument, "'" + hostList + "' is not a Slurm host list");
  };
  int depth = 0;
  for (char c : hostList) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0 || depth > 1) throw malformed();
  }
  if (depth != 0) throw malformed();
  // Up to the first comma outside brackets; each bracket group contributes the first number of
  // its first range, leading zeros kept ("[07-12]" -> "07").
  std::string host;
  bool inBracket = false;
  bool takingDigits = false;
  for (char c : hostList) {
    if (c == '[') {
      inBracket = takingDigits = true;
    } else if (c == ']') {
      inBracket = false;
    } else if (!inBracket) {
      if (c == ',') break;
      host += c;
    } else if (takingDigits && std::isdigit(static_cast<unsigned char>(c))) {
      host += c;
    } else {
      takingDigits = false;  // '-' or ',' ends the first number of the group
    }
  }
  if (host.empty()) throw malformed();
  return host;
}

int tasksOnNode(const std::string& tasksPerNode, int nodeIndex) {
  // Entries "N" or "N(xK)", comma-separated, in node order.
  std::string_view rest = tasksPerNode;
  int node = 0;
  while (!rest.empty()) {
    size_t end = rest.find(',');
    std::string_view entry = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    size_t i = 0;
    long tasks = 0;
    while (i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i])) &&
           tasks < 1000000) {
      tasks = tasks * 10 + (entry[i++] - '0');
    }
    if (i == 0) return -1;
    long repeat = 1;
    if (i < entry.size()) {
      if (entry.substr(i, 2) != "(x" || entry.back() != ')') return -1;
      repeat = 0;
      for (size_t j = i + 2; j + 1 < entry.size(); ++j) {
        if (!std::isdigit(static_cast<unsigned char>(entry[j])) || repeat > 1000000) return -1;
        repeat = repeat * 10 + (entry[j] - '0');
      }
      if (repeat == 0) return -1;
    }
    if (nodeIndex < node + repeat) return static_cast<int>(tasks);
    node += static_cast<int>(repeat);
  }
  return -1;
}

int storePort(uint64_t jobId, uint64_t stepId) {
  return 20000 + static_cast<int>((jobId * 16 + stepId) % 12000);
}

}  // namespace chorus::slurm
