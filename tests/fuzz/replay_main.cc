// Replays saved inputs through a fuzz harness without libFuzzer, for the ordinary build's tests:
//   <harness>_replay DIR...   runs LLVMFuzzerTestOneInput on every file under each DIR.
// A missing DIR is skipped (a harness may have no regressions yet); no input at all is an error.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path dir = argv[i];
    if (!fs::is_directory(dir)) {
      std::printf("replay: %s: no such directory, skipped\n", argv[i]);
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
      std::printf("replay: %s (%zu bytes)\n", entry.path().c_str(), bytes.size());
      std::fflush(stdout);  // names the input if it crashes
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++replayed;
    }
  }
  std::printf("replay: %zu inputs, all passed\n", replayed);
  return replayed > 0 ? 0 : 1;
}
