// The records of an encrypted connection: a round trip, and every way a record on the wire can
// be wrong (a flipped bit in the length, the ciphertext or the tag; a replayed, reordered or
// foreign record; another connection's keys) fails to open.
#include "auth/record_cipher.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::auth {
namespace {

struct Pair {
  Pair(const Nonce& c = freshNonce(), const Nonce& s = freshNonce())
      : key(std::vector<uint8_t>(32, 9)),
        client(deriveStreamKeys(key, Role::kClient, context(), c, s)),
        server(deriveStreamKeys(key, Role::kServer, context(), c, s)),
        seal(client.send, RecordCipher::Direction::kSeal),
        open(server.receive, RecordCipher::Direction::kOpen) {}
  static std::vector<uint8_t> context() { return {'r', 'a', 'n', 'k', 1, 2}; }
  JobKey key;
  StreamKeys client, server;
  RecordCipher seal, open;
};

std::vector<uint8_t> sealText(RecordCipher& c, const std::string& text) {
  std::vector<uint8_t> out(text.size() + kRecordOverhead);
  const std::array<std::span<const uint8_t>, 1> parts = {
      std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size())};
  c.seal(parts, out.data());
  return out;
}

bool opens(RecordCipher& c, const std::vector<uint8_t>& record, std::string* text = nullptr) {
  std::string why;
  auto n = recordLength(record.data(), &why);
  if (!n || *n + kRecordOverhead != record.size()) return false;
  std::vector<uint8_t> out(*n);
  bool ok = c.open(record.data(), *n, out.data());
  if (ok && text) text->assign(out.begin(), out.end());
  return ok;
}

TEST(RecordCipher, DirectionsHaveTheirOwnKeysAndBothSidesAgree) {
  Pair p;
  EXPECT_EQ(p.client.send, p.server.receive);
  EXPECT_EQ(p.client.receive, p.server.send);
  EXPECT_NE(p.client.send, p.client.receive);
  Pair other;  // other nonces: other keys
  EXPECT_NE(p.client.send, other.client.send);
}

TEST(RecordCipher, RoundTripAndTheCiphertextHidesThePlaintext) {
  Pair p;
  const std::string text(1000, 'x');
  for (int i = 0; i < 3; ++i) {
    auto record = sealText(p.seal, text);
    EXPECT_EQ(std::string(record.begin() + 4, record.begin() + 4 + 1000).find("xxxxxxxx"),
              std::string::npos);
    std::string back;
    EXPECT_TRUE(opens(p.open, record, &back));
    EXPECT_EQ(back, text);
  }
}

TEST(RecordCipher, AnAlteredBitAnywhereFailsToOpen) {
  for (size_t at : {size_t{0}, size_t{5}, size_t{20}, size_t{4 + 30 + 15}}) {
    Pair p;
    auto record = sealText(p.seal, std::string(30, 'y'));
    record[at] ^= 0x10;
    EXPECT_FALSE(opens(p.open, record)) << "bit flipped at byte " << at;
  }
}

TEST(RecordCipher, ReplayedAndReorderedRecordsFailToOpen) {
  Pair p;
  auto first = sealText(p.seal, "first");
  auto second = sealText(p.seal, "second");
  EXPECT_TRUE(opens(p.open, first));
  EXPECT_FALSE(opens(p.open, first)) << "replay";
  Pair q;
  auto a = sealText(q.seal, "a");
  auto b = sealText(q.seal, "b");
  EXPECT_FALSE(opens(q.open, b)) << "reordered";
  (void)a;
}

TEST(RecordCipher, ARecordOfAnotherConnectionFailsToOpen) {
  Pair p, other;
  EXPECT_FALSE(opens(p.open, sealText(other.seal, "elsewhere")));
}

TEST(RecordCipher, LengthsOutOfRangeAreRejected) {
  std::string why;
  const uint8_t zero[4] = {0, 0, 0, 0};
  const uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
  const uint8_t max[4] = {0, 0, 1, 0};   // 65536
  const uint8_t over[4] = {1, 0, 1, 0};  // 65537
  EXPECT_FALSE(recordLength(zero, &why));
  EXPECT_FALSE(recordLength(huge, &why));
  EXPECT_TRUE(recordLength(max, &why));
  EXPECT_FALSE(recordLength(over, &why));
  EXPECT_NE(why.find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace chorus::auth
