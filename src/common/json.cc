#include "common/json.h"

#include <cstdio>

namespace chorus::json {

void quote(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string quotedString(std::string_view s) {
  std::string out;
  quote(out, s);
  return out;
}

void field(std::string& out, const char* name, std::string_view value) {
  out += '"';
  out += name;
  out += "\": ";
  quote(out, value);
}

}  // namespace chorus::json
