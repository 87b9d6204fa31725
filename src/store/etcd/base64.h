// Base64 (RFC 4648, with padding): etcd's JSON gateway carries keys and values as bytes fields,
// which JSON spells in base64.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace chorus::store::etcd {

std::string base64Encode(std::string_view bytes);
// nullopt when `text` is not padded base64.
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace chorus::store::etcd
