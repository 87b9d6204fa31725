// Prefixes each line of one rank's output stream and writes whole lines only.
#pragma once

#include <string>
#include <string_view>

namespace chorus::launcher {

class OutputTagger {
 public:
  OutputTagger(int destFd, std::string prefix) : dest_(destFd), prefix_(std::move(prefix)) {}

  // Writes every line completed by data; keeps the unfinished rest for later.
  void write(std::string_view data);
  // Writes the unfinished last line, with a newline added (at end of stream).
  void flush();
  // True once a write failed (e.g. the reader of the launcher's stdout went away).
  bool broken() const { return broken_; }

 private:
  // Lines longer than this are cut, so that a rank printing no newline cannot exhaust memory.
  static constexpr size_t kMaxLine = 64 * 1024;

  void emit(std::string_view line);

  int dest_;
  std::string prefix_;
  std::string partial_;
  std::string outBuffer_;
  bool broken_ = false;
};

// Writes all of data to fd, retrying partial writes. False when fd is broken (EPIPE...).
bool writeAll(int fd, std::string_view data);

}  // namespace chorus::launcher
