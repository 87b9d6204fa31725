// Chorus C++ API: #include <chorus/chorus.hpp>.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>
#include <chorus/error.hpp>
#include <chorus/launch.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>
#include <chorus/types.hpp>
#include <chorus/work.hpp>

#include <chorus/chorus.h>

namespace chorus {
// The C++ communicator behind a C handle, for programs that mix both APIs.
CHORUS_API Communicator& communicatorOf(chorus_comm* comm);
}  // namespace chorus
