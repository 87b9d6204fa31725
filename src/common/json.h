// The one way Chorus writes JSON text (trace dumps, progress records, chorus-bench's results):
// strings always escaped, fields appended to a std::string. Readers use a JSON library
// (chorus-doctor); the library itself stays free of one.
#pragma once

#include <string>
#include <string_view>

namespace chorus::json {

// Appends s as a JSON string: quoted, with '"', '\\' and control characters escaped.
void quote(std::string& out, std::string_view s);
// s as a JSON string.
std::string quotedString(std::string_view s);
// Appends `"name": "value"` (value escaped; name is a literal of the caller's).
void field(std::string& out, const char* name, std::string_view value);

// Appends `"name": value` for an integer.
template <class N>
void number(std::string& out, const char* name, N value) {
  out += '"';
  out += name;
  out += "\": ";
  out += std::to_string(value);
}

}  // namespace chorus::json
