// Communicator::split: a collective over the parent that forms new communicators by color.
#include "algo/select.h"
#include "core/connect.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace chorus {

namespace {
// First word of every rank's split record: a rank that runs another all-gather of the same shape
// at this point is reported as a mismatch instead of being read as a split request.
constexpr int64_t kSplitMagic = 0x63686f7275737370;  // "chorussp"
}  // namespace

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  return split(color, key, impl_->options);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const Options& options) {
  algo::validateAlgorithmSetting(options.algorithm);  // as creation does, before any exchange
  Impl& im = *impl_;
  const int64_t index = static_cast<int64_t>(im.splits.fetch_add(1));
  const std::string where = "split #" + std::to_string(index) + " (rank " +
                            std::to_string(im.rank) + ", color " + std::to_string(color) + ")";
  if (color < 0) color = kNoColor;

  // Everyone learns everyone's (color, key) through an ordinary collective on this communicator:
  // it is numbered, ordered and failure-checked like any other.
  constexpr size_t kWords = 4;  // magic, index, color, key
  const int64_t mine[kWords] = {kSplitMagic, index, color, key};
  std::vector<int64_t> all(kWords * static_cast<size_t>(im.size));
  try {
    im.runBlocking(
        OpDesc::of(CollectiveKind::kAllGather, kWords, DataType::kI64, ReduceOp::kSum, 0), mine,
        all.data());
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  std::vector<std::pair<int64_t, int>> members;  // (key, rank here) of this color
  for (int q = 0; q < im.size; ++q) {
    const int64_t* rec = all.data() + kWords * static_cast<size_t>(q);
    if (rec[0] != kSplitMagic || rec[1] != index) {
      Error err(ErrorCode::kMismatch, where + ": rank " + std::to_string(q) +
                                          " ran a different all_gather instead of split #" +
                                          std::to_string(index));
      im.failWith(err);
      throw err;
    }
    if (color >= 0 && rec[2] == color) members.emplace_back(rec[3], q);
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end());
  const int childSize = static_cast<int>(members.size());
  const int childRank = static_cast<int>(
      std::find(members.begin(), members.end(), std::make_pair(int64_t{key}, im.rank)) -
      members.begin());
  if (!im.store) throw Error(ErrorCode::kInternal, where + ": communicator has no store");
  // Keys unique to (this communicator, the n-th split, color): this communicator's store is
  // already scoped to it, and a child's store to the child, so nested splits never meet.
  auto scoped =
      makePrefixStore("split/" + std::to_string(index) + "/" + std::to_string(color), im.store);
  try {
    auto child = connectScoped(std::move(scoped), im.routeHost, childRank, childSize, options);
    child->rootStore = im.rootStore;
    child->startTracing(im.rootStore);
    return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
  } catch (const Error& e) {
    throw Error(e.code(), where + ": connecting new rank " + std::to_string(childRank) + " of " +
                              std::to_string(childSize) + ": " + e.what());
  }
}

}  // namespace chorus
