// chorus-sim's --png: the CSV it wrote, drawn by matplotlib (time against size, one line per
// algorithm, the cost model's choice underneath).
#pragma once

#include <string>

namespace chorus::sim_tool {

// Runs /usr/bin/python3 on a generated script. False, with a message on stderr, when there is
// no plot (no python3 or no matplotlib).
bool plot(const std::string& csvPath, const std::string& pngPath, const std::string& title);

}  // namespace chorus::sim_tool
