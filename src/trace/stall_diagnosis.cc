#include "trace/stall_diagnosis.h"

#include <chorus/error.hpp>

#include <chrono>
#include <cstdlib>
#include <vector>

namespace chorus::trace {
namespace {

// The number after "\"name\": " in a one-line record; -1 when absent.
long long numberField(const std::string& text, const char* name) {
  const std::string key = std::string("\"") + name + "\": ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

}  // namespace

std::string stalledRanks(const Subject& subject, uint64_t number, const std::string& callName,
                         uint64_t callStartedUs) {
  const auto& store = subject.rootStore;
  const int size = subject.recorder.size();
  const int rank = subject.recorder.rank();
  // Large jobs: the records of every rank are too many to read on the failure path.
  if (!store || callStartedUs == 0 || size > 256) return "";
  std::vector<int> missing;
  long long lastOfFirst = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (std::chrono::steady_clock::now() >= deadline) return "";  // too slow to be sure
    const std::string key = "chorus/progress/" + subject.id + "/" + std::to_string(r);
    std::string record;
    try {
      if (!store->check({key})) continue;
      const Store::Bytes bytes = store->get(key, std::chrono::milliseconds(200));
      record.assign(bytes.begin(), bytes.end());
    } catch (const Error&) {
      continue;
    }
    const long long issued = numberField(record, "issued");
    const long long published = numberField(record, "published_us");
    // Only a record written after this rank entered the call can say the other had not.
    if (issued < 0 || published < 0 || static_cast<uint64_t>(published) <= callStartedUs) continue;
    if (static_cast<uint64_t>(issued) <= number) {
      missing.push_back(r);
      if (lastOfFirst < 0) lastOfFirst = issued - 1;
    }
  }
  if (missing.empty()) return "";
  std::string who = missing.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < missing.size(); ++i) who += (i ? ", " : "") + std::to_string(missing[i]);
  std::string text = who + " never entered " + callName;
  if (missing.size() == 1) {
    text += lastOfFirst >= 0 ? " (its last call: #" + std::to_string(lastOfFirst) + ")"
                             : " (it made no call yet)";
  }
  return text;
}

}  // namespace chorus::trace
