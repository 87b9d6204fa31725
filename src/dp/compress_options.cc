// parseCompression and toString: the text form of CompressionOptions ("powersgd:2").
#include <chorus/dp.hpp>

#include <charconv>
#include <string>

namespace chorus::dp {
namespace {

Error badCompression(std::string_view text, const std::string& why) {
  return Error(ErrorCode::kInvalidArgument, "dp: compression '" + std::string(text) + "': " + why +
                                                " (expected none, bf16, fp16, int8 or powersgd:R)");
}

}  // namespace

CompressionOptions parseCompression(std::string_view text) {
  CompressionOptions c;
  if (text == "none") {
    c.kind = Compression::kNone;
  } else if (text == "bf16") {
    c.kind = Compression::kBf16;
  } else if (text == "fp16") {
    c.kind = Compression::kFp16;
  } else if (text == "int8") {
    c.kind = Compression::kInt8;
  } else if (text.starts_with("powersgd")) {
    const std::string_view rest = text.substr(8);
    if (rest.empty() || rest[0] != ':') throw badCompression(text, "powersgd needs a rank");
    const std::string_view digits = rest.substr(1);
    int rank = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      throw badCompression(text, "the rank must be an integer");
    }
    if (rank < 1) throw badCompression(text, "the rank must be at least 1");
    c.kind = Compression::kPowerSgd;
    c.powerSgdRank = rank;
  } else {
    throw badCompression(text, "unknown kind");
  }
  return c;
}

std::string toString(const CompressionOptions& c) {
  switch (c.kind) {
    case Compression::kNone:
      return "none";
    case Compression::kBf16:
      return "bf16";
    case Compression::kFp16:
      return "fp16";
    case Compression::kInt8:
      return "int8";
    case Compression::kPowerSgd:
      return "powersgd:" + std::to_string(c.powerSgdRank);
  }
  return "unknown";
}

}  // namespace chorus::dp
