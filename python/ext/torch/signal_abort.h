// What a Work of the group runs when a Python signal handler raised (Ctrl-C) while Python's
// main thread waited on it: the group aborts, so its peers fail at once naming this rank rather
// than at their timeout, and this rank's later calls on it fail clearly.
#pragma once

#include "process_group_chorus.h"

#include <functional>

namespace chorus::torch_backend {

// Holds the group weakly: a Work may outlive it.
std::function<void()> abortOnSignal(ProcessGroupChorus* group);

}  // namespace chorus::torch_backend
