// The c10d Store that torch hands a backend (torchrun's TCPStore, a FileStore, the PrefixStore of
// a group), seen as a chorus::Store, so that a communicator meets its peers through it: no second
// port and no CHORUS_STORE under torch.
#pragma once

#include <chorus/store.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

namespace chorus::torch_backend {

std::shared_ptr<Store> bridgeStore(c10::intrusive_ptr<c10d::Store> store);

}  // namespace chorus::torch_backend
