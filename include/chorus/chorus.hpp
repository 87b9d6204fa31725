// Chorus C++ API: #include <chorus/chorus.hpp>.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>
#include <chorus/types.hpp>
#include <chorus/work.hpp>
