// An encrypted TCP link (CHORUS_ENCRYPT=1): the same framing and state machine as TcpLink, with
// every byte of the stream going through the connection's SealedStream. Its one write path seals
// the head send into records; control frames are sealed and written whole; no zero-copy.
#pragma once

#include "transport/tcp/sealed_stream.h"
#include "transport/tcp/tcp_link.h"

#include <memory>
#include <string>

namespace chorus::transport::tcp {

class SealedTcpLink final : public TcpLink {
 public:
  SealedTcpLink(int peer, Fd fd, std::string address, OpState& op, int epollFd,
                std::unique_ptr<SealedStream> sealed);

  void clear() noexcept override;

 private:
  // Seals the head send into records and writes them; a send is done once the record holding
  // its last byte is written.
  void onWritable() override;
  bool readSome(uint8_t* dst, size_t want, size_t& got, bool& drained) override;
  bool buffered() const override { return TcpLink::buffered() || sealed_->buffered(); }
  void writeAbort(const uint8_t* header, const std::string& text) noexcept override;
  bool writeGoodbye(const uint8_t* header) noexcept override;
  void writeWake(const uint8_t* header) noexcept override;
  bool padFrame() noexcept override;
  // A broken encrypted stream holds nothing more that can be trusted.
  bool salvageable() const override { return !sealed_->broken(); }
  bool discard(uint8_t* sink, size_t want, size_t& k) override { return readSealed(sink, want, k); }

  bool readSealed(uint8_t* dst, size_t want, size_t& got);
  // Writes a control frame (header + optional text) whole, waiting a little; false on failure.
  bool sendControl(const uint8_t* header, const std::string& text) noexcept;

  std::unique_ptr<SealedStream> sealed_;
  bool headSealed_ = false;  // every byte of the head send is sealed; done once written
};

}  // namespace chorus::transport::tcp
