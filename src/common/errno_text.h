// The text of an errno value, safe to call from any thread (strerror is not).
#pragma once

#include <string>

namespace chorus {

std::string errnoText(int err);

}  // namespace chorus
