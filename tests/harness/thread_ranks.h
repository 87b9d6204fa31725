// Runs N ranks as threads of the test process, each with its own Communicator over one
// in-process store. Rank failures are collected and reported on the test's thread.
#pragma once

#include <chorus/chorus.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::testing {

// Options for tests: short timeouts so that a bug fails fast instead of hanging the suite; the
// defaults otherwise, but for the sub-structs (trace, auth, tcp, storeLimits), read from the
// environment.
Options testOptions(std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Creates `size` communicators (concurrently, as rendezvous requires), then calls body(comm) on
// one thread per rank. Returns the messages of exceptions thrown by ranks (empty: all passed).
std::vector<std::string> runRanks(int size, const std::function<void(Communicator&)>& body,
                                  Options options = testOptions());

// Same, with rank r on host hostIds[r] (Options::hostId): ranks on one host use shared memory,
// the others TCP, and the hierarchical algorithms see that layout.
std::vector<std::string> runRanksOn(const std::vector<std::string>& hostIds,
                                    const std::function<void(Communicator&)>& body,
                                    Options options = testOptions());
void expectRanksOn(const std::vector<std::string>& hostIds,
                   const std::function<void(Communicator&)>& body, Options options = testOptions());

// runRanks + EXPECT that no rank failed.
void expectRanks(int size, const std::function<void(Communicator&)>& body,
                 Options options = testOptions());

}  // namespace chorus::testing
