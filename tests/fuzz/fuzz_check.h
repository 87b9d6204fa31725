// What every harness demands of a parser: a bad input is a chorus::Error that says what was wrong.
// Anything else (another exception, a crash, a sanitizer report) is a finding.
#pragma once

#include <chorus/error.hpp>

#include <cstdio>
#include <cstdlib>

namespace chorus::fuzz {

// An error without a message tells the user nothing: treat it as a finding.
inline void requireMessage(const Error& e) {
  if (e.what()[0] == '\0') {
    std::fprintf(stderr, "error %d without a message\n", static_cast<int>(e.code()));
    std::abort();
  }
}

[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}

}  // namespace chorus::fuzz
