// Sizes on the tools' command lines: "64K", "1MiB", "256M", "8".
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>

namespace chorus::tools {

inline size_t parseBytes(const std::string& s) {
  size_t used = 0;
  double v = std::stod(s, &used);
  std::string suffix = s.substr(used);
  static const std::map<std::string, double> units = {
      {"", 1},        {"B", 1},        {"K", 1024},     {"KB", 1024},
      {"KiB", 1024},  {"M", 1 << 20},  {"MB", 1 << 20}, {"MiB", 1 << 20},
      {"G", 1 << 30}, {"GB", 1 << 30}, {"GiB", 1 << 30}};
  auto it = units.find(suffix);
  if (it == units.end() || v < 0) throw std::invalid_argument("bad size '" + s + "'");
  return static_cast<size_t>(v * it->second);
}

}  // namespace chorus::tools
