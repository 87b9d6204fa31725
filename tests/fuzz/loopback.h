// Loopback TCP plumbing for the store harnesses: blocking sockets with timeouts, so that a server
// or client that stops answering shows up as a finding instead of a stuck fuzzer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::fuzz {

// A blocking socket connected to 127.0.0.1:port, send and receive timeouts set; -1 on failure.
int connectLoopback(int port, int timeout_ms);
// A listening socket on 127.0.0.1 with a kernel-chosen port (*port); aborts on failure.
int listenLoopback(int* port);
void setTimeouts(int fd, int timeout_ms);
// Sends what it can; a peer that closed early is not an error here.
void sendAll(int fd, const uint8_t* data, size_t size);
// Reads until the peer closes. Returns false when the receive timeout passed first.
bool readToEnd(int fd, std::vector<uint8_t>* out);
// Reads exactly `size` bytes; false on a close or timeout first.
bool readExactly(int fd, uint8_t* out, size_t size);

}  // namespace chorus::fuzz
