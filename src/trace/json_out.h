// The JSON the recorder writes (docs/trace-format.md): a dump and a progress record.
#pragma once

#include "trace/subject.h"

#include <string>

namespace chorus::trace {

// reason: "failure", "timeout", "request", "signal"; error: null for none.
std::string dumpJson(const Subject& s, const char* reason, const std::string* error);
std::string progressJson(const Subject& s);
// Writes the dump to <dir>/chorus-trace-<id>-rank<R>.json through a temporary file and a
// rename; returns that path. Throws Error(kSystem) when it cannot.
std::string writeDump(const Subject& s, const std::string& dir, const char* reason,
                      const std::string* error);
// The lines CHORUS_REPORT=1 prints: one per rank that arrived last at least once.
std::string stragglerText(const StragglerCopy& st, int reporter);

}  // namespace chorus::trace
