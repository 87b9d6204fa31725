// Communicator::allocate / deallocate: the public face of the registry (core/registered_memory.h).
#include "core/communicator_impl.h"
#include "core/registered_memory.h"

namespace chorus {

void* Communicator::allocate(size_t bytes) { return registered::allocate(bytes, impl_.get()); }

void Communicator::deallocate(void* p) { registered::release(p); }

}  // namespace chorus
