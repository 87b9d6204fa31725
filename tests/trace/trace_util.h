// Helpers of the flight-recorder tests: a scratch directory, reading a dump, checking its JSON.
#pragma once

#include "harness/scratch_dir.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {

using ScratchDir = chorus::test::ScratchDir;

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The dumps in dir whose name ends in -rank<R>.json.
inline std::vector<std::string> dumpsOf(const std::string& dir, int rank) {
  std::vector<std::string> out;
  const std::string tail = "-rank" + std::to_string(rank) + ".json";
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    const std::string name = f.path().filename().string();
    if (name.rfind("chorus-trace-", 0) == 0 && name.size() > tail.size() &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      out.push_back(f.path().string());
    }
  }
  return out;
}

// Waits (up to `limit`) for exactly one dump of `rank` in dir; returns its path or "".
inline std::string waitForDump(const std::string& dir, int rank,
                               std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto found = dumpsOf(dir, rank);
    if (found.size() == 1) return found[0];
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Whether python3 parses the file as JSON (skipped, true, when there is no python3).
inline bool parsesAsJson(const std::string& path) {
  if (::access("/usr/bin/python3", X_OK) != 0) return true;
  const std::string cmd =
      "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '" + path + "'";
  return std::system(cmd.c_str()) == 0;
}

// The entry objects of a dump, one string each ("{...}" up to its peers' closing bracket).
inline std::vector<std::string> entriesOf(const std::string& json) {
  std::vector<std::string> out;
  static const std::regex entry(R"(\{"number": [^\n]*\]\})");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), entry);
       it != std::sregex_iterator(); ++it) {
    out.push_back(it->str());
  }
  return out;
}

// The entry with this number and collective, or "".
inline std::string entryNumbered(const std::string& json, int number,
                                 const std::string& collective = "allreduce") {
  const std::string head =
      "{\"number\": " + std::to_string(number) + ", \"collective\": \"" + collective + "\"";
  for (const auto& e : entriesOf(json)) {
    if (e.rfind(head, 0) == 0) return e;
  }
  return "";
}

}  // namespace chorus::testing
