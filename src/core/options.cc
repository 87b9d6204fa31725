// The names of the settings' enums (common/options_env.cc reads the CHORUS_* variables).
#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <string>

namespace chorus {

std::string_view toString(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kShm:
      return "shm";
  }
  return "?";
}

std::string_view toString(DebugLevel level) {
  switch (level) {
    case DebugLevel::kOff:
      return "0";
    case DebugLevel::kRank0:
      return "1";
    case DebugLevel::kAll:
      return "all";
  }
  return "?";
}

TransportKind parseTransportKind(std::string_view text) {
  for (TransportKind k : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kShm}) {
    if (text == toString(k)) return k;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "CHORUS_TRANSPORT='" + std::string(text) + "': expected auto, tcp or shm");
}

DebugLevel parseDebugLevel(std::string_view text) {
  for (DebugLevel d : {DebugLevel::kOff, DebugLevel::kRank0, DebugLevel::kAll}) {
    if (text == toString(d)) return d;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "CHORUS_DEBUG='" + std::string(text) + "': expected 0, 1 or all");
}

}  // namespace chorus
