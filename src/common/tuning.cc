// Tuning files: the cost model's constants, measured by chorus-bench --calibrate.
#include "common/tuning_text.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace chorus {
namespace {

[[noreturn]] void bad(const std::string& path, int line, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument,
              "tuning file " + path + (line > 0 ? ":" + std::to_string(line) : "") + ": " + why);
}

// Every value in the file and its scale to seconds (per message or per byte).
struct Key {
  std::string name;
  double* value;
  double scale;
};

std::vector<Key> keysOf(Tuning& t) {
  std::vector<Key> keys{{"shm.alpha_us", &t.shm.alpha, 1e-6},
                        {"shm.beta_ns_per_byte", &t.shm.beta, 1e-9},
                        {"net.alpha_us", &t.net.alpha, 1e-6},
                        {"net.beta_ns_per_byte", &t.net.beta, 1e-9},
                        {"ring.bidirectional_bytes", &t.ringBidirectionalBytes, 1}};
  for (int d = 0; d < kNumDataTypes; ++d) {
    keys.push_back({"gamma_ns_per_byte." + std::string(toString(static_cast<DataType>(d))),
                    &t.gamma[static_cast<size_t>(d)], 1e-9});
  }
  return keys;
}

}  // namespace

Tuning parseTuningText(std::string_view contents, const std::string& source) {
  Tuning t;
  auto keys = keysOf(t);
  std::istringstream in{std::string(contents)};
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream fields(text);
    std::string name, value, extra;
    if (!(fields >> name)) continue;  // blank or comment
    if (!(fields >> value) || (fields >> extra)) bad(source, line, "expected 'key value'");
    Key* key = nullptr;
    for (auto& k : keys) {
      if (k.name == name) key = &k;
    }
    if (key == nullptr) bad(source, line, "unknown key '" + name + "'");
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
      bad(source, line, "'" + value + "' is not a non-negative number");
    }
    *key->value = v * key->scale;
  }
  return t;
}

Tuning Tuning::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad(path, 0, std::string("cannot read it: ") + errnoText(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) bad(path, 0, std::string("cannot read it: ") + errnoText(errno));
  return parseTuningText(contents.str(), path);
}

void Tuning::writeFile(const std::string& path, const std::string& comment) const {
  Tuning copy = *this;
  std::ostringstream out;
  out.precision(12);  // byte counts such as ring.bidirectional_bytes stay exact
  std::istringstream lines(comment);
  for (std::string l; std::getline(lines, l);) out << "# " << l << '\n';
  for (const auto& k : keysOf(copy)) out << k.name << ' ' << *k.value / k.scale << '\n';
  std::ofstream f(path);
  if (!f || !(f << out.str()) || !f.flush()) {
    throw Error(ErrorCode::kInvalidArgument,
                "cannot write tuning file " + path + ": " + errnoText(errno));
  }
}

}  // namespace chorus
