// Sets environment variables for one test and restores the previous environment afterwards.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace chorus {

class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }
  void set(const std::string& k, const char* v) {
    if (!saved_.count(k)) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (v) {
      setenv(k.c_str(), v, 1);
    } else {
      unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace chorus
