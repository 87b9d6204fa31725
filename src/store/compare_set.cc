#include "store/compare_set.h"

namespace chorus::store {

ComparesAndSets* compareSetOf(Store& store) {
  auto* cas = dynamic_cast<ComparesAndSets*>(&store);
  return cas != nullptr && cas->offersCompareSet() ? cas : nullptr;
}

}  // namespace chorus::store
