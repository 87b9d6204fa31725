#include "output_tagger.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace chorus::launcher {

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

void OutputTagger::write(std::string_view data) {
  // All complete lines of one read go out in a single write; the launcher is the only writer,
  // so lines of different ranks never interleave.
  outBuffer_.clear();
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      if (partial_.size() >= kMaxLine) {
        emit(partial_);
        partial_.clear();
      }
      break;
    }
    if (partial_.empty()) {
      emit(data.substr(0, newline));
    } else {
      partial_.append(data.substr(0, newline));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
  if (!broken_ && !writeAll(dest_, outBuffer_)) broken_ = true;
}

void OutputTagger::flush() {
  if (partial_.empty()) return;
  outBuffer_.clear();
  emit(partial_);
  partial_.clear();
  if (!broken_ && !writeAll(dest_, outBuffer_)) broken_ = true;
}

void OutputTagger::emit(std::string_view line) {
  outBuffer_.append(prefix_);
  outBuffer_.append(line);
  outBuffer_.push_back('\n');
}

}  // namespace chorus::launcher
