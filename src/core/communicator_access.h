// Communicator::Impl is private to Communicator (include/chorus/communicator.hpp); the library's
// own code reaches it through this friend, which the public header declares and only the
// library defines.
#pragma once

#include <chorus/communicator.hpp>

namespace chorus {

struct CommunicatorAccess {
  using Impl = Communicator::Impl;
  static Impl& of(Communicator& c) { return *c.impl_; }
  static const Impl& of(const Communicator& c) { return *c.impl_; }
};

// The communicator's state (core/communicator_impl.h), as the library's internals name it.
using CommunicatorImpl = CommunicatorAccess::Impl;

}  // namespace chorus
