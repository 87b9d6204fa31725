// Membership changes: Communicator::shrink, join and their queries (docs/fault-tolerance.md).
#include "core/communicator_impl.h"

#include <chorus/error.hpp>

namespace chorus {

namespace {
[[noreturn]] void notBuilt() { throw Error(ErrorCode::kInternal, "not built yet"); }
}  // namespace

uint64_t Communicator::generation() const { notBuilt(); }
std::vector<int> Communicator::failedRanks() const { notBuilt(); }
std::unique_ptr<Communicator> Communicator::shrink() { notBuilt(); }
std::vector<int> Communicator::formerRanks() const { notBuilt(); }
int Communicator::joinersWaiting() const { notBuilt(); }
std::unique_ptr<Communicator> Communicator::join(std::shared_ptr<Store>, Options) { notBuilt(); }
std::unique_ptr<Communicator> Communicator::join(const std::string&, Options) { notBuilt(); }

}  // namespace chorus
