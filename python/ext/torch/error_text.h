// Chorus's failures in the words torch users, their tools and torch's own tests look for.
#pragma once

#include <exception>

namespace chorus::torch_backend {

// A Chorus timeout (ErrorCode::kTimeout) gets "Timed out" in front of its account ("chorus
// backend: Timed out in barrier #0 (rank 0): rank 1 never entered ..."), the words torch's own
// backends use for a collective that ran out of time; other errors pass unchanged.
std::exception_ptr forTorch(std::exception_ptr error);

}  // namespace chorus::torch_backend
