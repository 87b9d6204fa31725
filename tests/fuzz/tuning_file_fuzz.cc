// The tuning-file parser over any text: a Tuning with finite non-negative values, or an Error.
#include "common/tuning_text.h"
#include "fuzz_check.h"

#include <cmath>
#include <cstdint>
#include <string_view>

using namespace chorus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    Tuning t = parseTuningText(text, "fuzz.tuning");
    for (double v : {t.shm.alpha, t.shm.beta, t.net.alpha, t.net.beta, t.ringBidirectionalBytes}) {
      if (!std::isfinite(v) || v < 0) fuzz::finding("the tuning parser accepted a bad value");
    }
    for (double g : t.gamma) {
      if (!std::isfinite(g) || g < 0) fuzz::finding("the tuning parser accepted a bad gamma");
    }
  } catch (const Error& e) {
    fuzz::requireMessage(e);
  }
  return 0;
}
