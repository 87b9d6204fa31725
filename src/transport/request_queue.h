// The intrusive FIFO of pending requests (Request::next) that every link keeps per direction.
#pragma once

#include "transport/transport.h"

namespace chorus::transport {

inline void pushRequest(Request*& head, Request*& tail, Request* r) {
  r->next = nullptr;
  if (tail) {
    tail->next = r;
  } else {
    head = r;
  }
  tail = r;
}

inline Request* popRequest(Request*& head, Request*& tail) {
  Request* r = head;
  head = r->next;
  if (!head) tail = nullptr;
  r->next = nullptr;
  return r;
}

}  // namespace chorus::transport
