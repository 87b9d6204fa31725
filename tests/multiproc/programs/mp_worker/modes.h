// The modes of mp_worker (mp_worker.cc lists them with their arguments), one file each.
#pragma once

#include "common.h"

#include <cstddef>
#include <string>

namespace mpworker {

int runCorrect(const Ctx& c);
int runKill(Ctx& c, int victim, int mib, int delayMs, int lingerMs, const std::string& op);
int runExitEarly(Ctx& c, int leaver, int settleMs);
int runMismatch(Ctx& c, const std::string& kind, bool allOdd, size_t count, int settleMs);
int runInvalid(Ctx& c);
int runGarbage(int attacker);

}  // namespace mpworker
