// Training checkpoints: named f32 and i64 buffers in one file with a checksum, written atomically
// (temporary file, fsync, rename, fsync of the directory). See docs/dp.md, "Checkpoints".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train {

struct CheckpointEntry {
  enum class Type : uint8_t { kF32 = 1, kI64 = 2 };
  std::string name;
  Type type;
  void* data;
  size_t count;
};

// Writes DIR/checkpoint-<step>.bin (DIR created if missing) and deletes older checkpoints beyond
// the newest `keep`. Returns the path. Throws std::runtime_error naming the file.
std::string writeCheckpoint(const std::string& dir, int64_t step,
                            const std::vector<CheckpointEntry>& entries, int keep = 2);

// The newest DIR/checkpoint-<step>.bin by step ("" when there is none; temporary files of an
// interrupted write are not checkpoints).
std::string newestCheckpoint(const std::string& dir);

// Reads `path` into the entries, which must match the file's (names, types, counts, order).
// A truncated or corrupted file (checksum), or one of another model or optimizer, throws
// std::runtime_error naming the file and what is wrong; the entries are then left untouched.
void readCheckpoint(const std::string& path, const std::vector<CheckpointEntry>& entries);

}  // namespace chorus::train
