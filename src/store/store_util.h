// Helpers shared by the store implementations (not part of the public API).
#pragma once

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/deadline.h"

namespace chorus::store {

// Counters written by Store::add are stored as decimal ASCII ("-12"), in every store.
// Throws Error(kInvalidArgument) naming the key when the value is not such an integer.
int64_t parseCounter(const std::string& key, const Store::Bytes& value);
Store::Bytes formatCounter(int64_t value);

// a + b, throwing Error(kInvalidArgument) naming the key on overflow.
int64_t addCounter(const std::string& key, int64_t a, int64_t b);

// "Timed out after 100 ms waiting for key 'x' in <where>".
[[noreturn]] void throwWaitTimeout(std::string_view where, std::string_view what,
                                   std::chrono::milliseconds timeout);

// Printable form of a key for error messages: escapes non-printable bytes, truncates long keys.
std::string quoteKey(std::string_view key);

// Error(kSystem, what + ": " + the errno text of err).
[[noreturn]] void throwSystem(const std::string& what, int err);

}  // namespace chorus::store
