// The store of the launcher that started this process, for the progress records: the backend's
// communicators meet their peers through torch's store, but chorus-run's hang watch (and
// chorus-doctor --live) read chorus-run's own store, which chorus-run hands every rank as
// CHORUS_STORE. Publishing there gives a torch job the same live verdict and dumps as a C++ one.
#pragma once

#include <chorus/store.hpp>

#include <memory>

namespace chorus::torch_backend {

// CHORUS_STORE opened once per process and shared by every group; null when it is not set or
// cannot be opened (said once on stderr: the job runs on without progress records there). Its
// client proves the key of `auth` (the communicator's Options::auth).
std::shared_ptr<Store> launcherStore(int rank, const AuthOptions& auth);

}  // namespace chorus::torch_backend
