// Helpers of the chorus-doctor tests: running the tool with its output captured, and scratch
// directories.
#pragma once

#include "harness/scratch_dir.h"

#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

namespace chorus::doctor::test {

struct ToolResult {
  int status = -1;  // exit status, -1 when it did not exit normally
  std::string out;
  std::string firstLine() const { return out.substr(0, out.find('\n')); }
};

// Runs chorus-doctor with args (shell words, already quoted where needed); stdout only. The tool
// reads local files or a local store and never waits without a deadline of its own.
inline ToolResult runDoctor(const std::string& args) {
  std::string command = "timeout 30 " CHORUS_DOCTOR_BIN " " + args + " 2>/dev/null";
  ToolResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  int status = pclose(pipe);
  if (WIFEXITED(status)) r.status = WEXITSTATUS(status);
  return r;
}

inline std::string fixture(const std::string& name) {
  return std::string(CHORUS_DOCTOR_FIXTURES) + "/" + name;
}

using ScratchDir = chorus::test::ScratchDir;

}  // namespace chorus::doctor::test
