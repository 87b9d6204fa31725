// The parsers of CHORUS_* and launcher values over any text. The first byte picks the parser (and
// for tasksOnNode the second byte the node); the rest is the value.
#include "common/env_vars.h"
#include "core/slurm_env.h"
#include "fuzz_check.h"

#include <chorus/options.hpp>

#include <cstdint>
#include <string>

using namespace chorus;

namespace {

// The ranges the launch code asks parseEnvNumber for, down to a negative lower bound.
constexpr long long kRanges[][2] = {{0, 1 << 24}, {1, 65534}, {0, 1LL << 62}, {-1, 0}};

void parseOne(uint8_t which, uint8_t node, const std::string& text) {
  switch (which % 7) {
    case 0:
      (void)parseAlgorithmSetting(text);
      break;
    case 1:
      (void)parseTransportKind(text);
      break;
    case 2:
      (void)parseDebugLevel(text);
      break;
    case 3: {
      const auto& r = kRanges[node % 4];
      long long v = parseEnvNumber("CHORUS_FUZZ", text, r[0], r[1]);
      if (v < r[0] || v > r[1]) fuzz::finding("parseEnvNumber returned a number out of range");
      break;
    }
    case 4:
      if (slurm::firstHost(text).empty()) fuzz::finding("firstHost returned an empty host");
      break;
    case 5:
      if (slurm::tasksOnNode(text, node) < -1) fuzz::finding("tasksOnNode below -1");
      break;
    case 6:
      (void)slurm::tasksOnNode(text, 0x7fffffff - node);  // a node index near the int limit
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  try {
    parseOne(data[0], data[1], text);
  } catch (const Error& e) {
    fuzz::requireMessage(e);
  }
  return 0;
}
