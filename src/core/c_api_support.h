// What the C API's files share: the handles behind the opaque C types, and the helpers that
// turn exceptions into status codes.
#pragma once

#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include "core/c_enum.h"

#include <memory>
#include <mutex>
#include <string>

struct chorus_comm {
  std::unique_ptr<chorus::Communicator> comm;

  // The last failure's message. Written by whichever thread's call failed and read from any
  // thread (chorus_comm_get_async_error and chorus_comm_dump_trace are meant for a second thread
  // while a call is stuck), so under a lock; chorus_last_error hands out a per-thread copy.
  void setError(std::string message) {
    std::lock_guard<std::mutex> lock(errorMutex);
    lastError = std::move(message);
  }
  std::string error() const {
    std::lock_guard<std::mutex> lock(errorMutex);
    return lastError;
  }

 private:
  mutable std::mutex errorMutex;
  std::string lastError;
};

struct chorus_request {
  chorus_comm* comm;
  chorus::Work work;
};

namespace chorus::capi {

// Failures without a communicator (chorus_comm_init*, a null handle) keep their message here, per
// thread; chorus_last_error(NULL) returns it.
inline thread_local std::string initError;

inline chorus_status toStatus(chorus::ErrorCode c) { return static_cast<chorus_status>(c); }

template <class F>
chorus_status guarded(chorus_comm* c, F&& f) {
  if (c == nullptr) {
    initError = "communicator is null";  // readable through chorus_last_error(NULL)
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  try {
    f();
    return CHORUS_OK;
  } catch (const chorus::Error& e) {
    c->setError(e.what());
    return toStatus(e.code());
  } catch (const std::bad_alloc&) {
    c->setError("out of memory");
    return CHORUS_ERR_SYSTEM;
  } catch (const std::exception& e) {
    c->setError(e.what());
    return CHORUS_ERR_INTERNAL;
  }
}

template <class Make>
chorus_status initWith(chorus_comm** out, Make&& make) {
  if (out == nullptr) {
    initError = "chorus_comm_init: comm pointer is null";
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    auto c = std::make_unique<chorus_comm>();
    c->comm = make();
    *out = c.release();
    return CHORUS_OK;
  } catch (const chorus::Error& e) {
    initError = e.what();
    return toStatus(e.code());
  } catch (const std::exception& e) {
    initError = e.what();
    return CHORUS_ERR_INTERNAL;
  }
}

using chorus::rawEnum;

inline chorus::DataType dt(const chorus_dtype& t) {
  int v = rawEnum(t);
  return static_cast<chorus::DataType>(v >= 0 && v < chorus::kNumDataTypes ? v : 255);
}
inline chorus::ReduceOp rop(const chorus_op& o) {
  int v = rawEnum(o);
  return static_cast<chorus::ReduceOp>(v >= 0 && v < chorus::kNumReduceOps ? v : 255);
}

template <class Issue>
chorus_status startRequest(chorus_comm* c, chorus_request** req, Issue&& issue) {
  if (req == nullptr) {
    if (c) c->setError("request pointer is null");
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *req = nullptr;
  return guarded(c, [&] { *req = new chorus_request{c, issue()}; });
}

}  // namespace chorus::capi
