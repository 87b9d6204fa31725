// chorus-sim's run: every size and algorithm of the sweep over one virtual world, printed as a
// table, written as CSV and drawn (--csv, --png). main.cc only reads the command line.
#pragma once

#include <string>
#include <vector>

namespace chorus::sim_tool {

// The command line's settings (defaults as chorus-sim --help shows them).
struct Settings {
  int hosts = 4, perHost = 8;
  double netAlphaUs = 5, netGBps = 12.5, shmAlphaUs = 1, shmGBps = 10, oversub = 1;
  double reduceGBps = 10, copyGBps = 10, overheadUs = 0.2, coreGBps = 0;
  int sharedCores = 0;
  std::vector<std::string> stragglers, algoNames;
  std::string minBytes = "8", maxBytes = "256M", segment = "512K", csvPath, pngPath;
  std::string ringBothWays = "0";
  double stepFactor = 4, maxMemoryGiB = 8, runLimit = 0;
  bool quiet = false;
};

// Runs the sweep; throws std::invalid_argument for settings that do not hold together and
// std::runtime_error when the CSV cannot be written.
void simulate(const Settings& s);

}  // namespace chorus::sim_tool
