// Options::algorithm: the public names of collectives and algorithms, the CHORUS_ALGO text form,
// and which algorithm each collective may be forced to (algorithmsFor).
#include "algo/select.h"

#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace chorus {

namespace {

constexpr Algorithm kAlgorithms[] = {Algorithm::kAuto,
                                     Algorithm::kRing,
                                     Algorithm::kRecursiveDoubling,
                                     Algorithm::kHalvingDoubling,
                                     Algorithm::kDoubleTree,
                                     Algorithm::kOneShot,
                                     Algorithm::kTwoShot,
                                     Algorithm::kHierarchical,
                                     Algorithm::kHalving,
                                     Algorithm::kDoubling,
                                     Algorithm::kChain,
                                     Algorithm::kBinomial,
                                     Algorithm::kScatterAllGather,
                                     Algorithm::kDissemination,
                                     Algorithm::kRingGather,
                                     Algorithm::kDirect,
                                     Algorithm::kPairwise};

Collective collectiveAt(size_t i) { return static_cast<Collective>(i); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string withoutUnderscores(std::string_view s) {
  std::string plain;
  for (char c : s) {
    if (c != '_' && c != '-') plain += c;
  }
  return plain;
}

// "allreduce", "reduce_scatter" / "reducescatter" / "reduce-scatter", ...
std::optional<Collective> collectiveNamed(std::string_view name) {
  for (size_t i = 0; i < kNumCollectives; ++i) {
    if (withoutUnderscores(name) == withoutUnderscores(toString(collectiveAt(i)))) {
      return collectiveAt(i);
    }
  }
  return std::nullopt;
}

std::optional<Algorithm> algorithmNamed(std::string_view name) {
  for (Algorithm a : kAlgorithms) {
    if (name == toString(a)) return a;
  }
  return std::nullopt;
}

bool collectiveHas(Collective c, Algorithm a) {
  if (a == Algorithm::kAuto) return true;
  const auto& known = algo::algorithmsFor(c);
  return std::find(known.begin(), known.end(), algo::toAlgorithmId(a)) != known.end();
}

std::string noSuchAlgorithm(Collective c, std::string_view name) {
  std::string s =
      std::string(toString(c)) + " has no algorithm '" + std::string(name) + "' (choices: auto";
  for (AlgorithmId a : algo::algorithmsFor(c)) s += ", " + std::string(toString(a));
  return s + ")";
}

}  // namespace

std::string_view toString(Algorithm algorithm) {
  if (algorithm == Algorithm::kAuto) return "auto";
  AlgorithmId id = algo::toAlgorithmId(algorithm);
  return id == AlgorithmId::kNone ? "?" : toString(id);
}

std::string toString(const AlgorithmSetting& setting) {
  std::string list;
  int entries = 0;
  for (size_t i = 0; i < kNumCollectives; ++i) {
    if (setting.forced[i] == Algorithm::kAuto) continue;
    list += std::string(entries++ ? "," : "") + std::string(toString(collectiveAt(i))) + "=" +
            std::string(toString(setting.forced[i]));
  }
  if (entries == 0) return "auto";
  if (entries == 1 && setting[Collective::kAllReduce] != Algorithm::kAuto) {
    return std::string(toString(setting[Collective::kAllReduce]));
  }
  return list;
}

AlgorithmSetting parseAlgorithmSetting(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "CHORUS_ALGO='" + std::string(text) + "': " + why);
  };
  AlgorithmSetting setting;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    Collective c = Collective::kAllReduce;  // a bare name is the all-reduce's
    std::string_view name = entry;
    if (eq != std::string_view::npos) {
      std::string_view collective = trim(entry.substr(0, eq));
      auto named = collectiveNamed(collective);
      if (!named) {
        std::string known;
        for (size_t i = 0; i < kNumCollectives; ++i) {
          known += std::string(i ? ", " : "") + std::string(toString(collectiveAt(i)));
        }
        throw bad("unknown collective '" + std::string(collective) + "' (" + known + ")");
      }
      c = *named;
      name = trim(entry.substr(eq + 1));
    }
    auto a = algorithmNamed(name);
    if (!a || !collectiveHas(c, *a)) throw bad(noSuchAlgorithm(c, name));
    setting[c] = *a;
  }
  return setting;
}

namespace algo {

AlgorithmId toAlgorithmId(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return AlgorithmId::kNone;
    case Algorithm::kRing:
      return AlgorithmId::kRing;
    case Algorithm::kRecursiveDoubling:
      return AlgorithmId::kRecursiveDoubling;
    case Algorithm::kHalvingDoubling:
      return AlgorithmId::kHalvingDoubling;
    case Algorithm::kDoubleTree:
      return AlgorithmId::kDoubleTree;
    case Algorithm::kOneShot:
      return AlgorithmId::kOneShot;
    case Algorithm::kTwoShot:
      return AlgorithmId::kTwoShot;
    case Algorithm::kHierarchical:
      return AlgorithmId::kHierarchical;
    case Algorithm::kHalving:
      return AlgorithmId::kHalving;
    case Algorithm::kDoubling:
      return AlgorithmId::kDoubling;
    case Algorithm::kChain:
      return AlgorithmId::kChain;
    case Algorithm::kBinomial:
      return AlgorithmId::kBinomial;
    case Algorithm::kScatterAllGather:
      return AlgorithmId::kScatterAllGather;
    case Algorithm::kDissemination:
      return AlgorithmId::kDissemination;
    case Algorithm::kRingGather:
      return AlgorithmId::kRingGather;
    case Algorithm::kDirect:
      return AlgorithmId::kDirect;
    case Algorithm::kPairwise:
      return AlgorithmId::kPairwise;
  }
  return AlgorithmId::kNone;
}

std::optional<AlgorithmId> forcedAlgorithm(CollectiveKind kind, const AlgorithmSetting& setting) {
  Algorithm a = setting.forced[static_cast<size_t>(kind)];
  if (a == Algorithm::kAuto) return std::nullopt;
  return toAlgorithmId(a);
}

void validateAlgorithmSetting(const AlgorithmSetting& setting) {
  for (size_t i = 0; i < kNumCollectives; ++i) {
    const Algorithm a = setting.forced[i];
    if (!collectiveHas(collectiveAt(i), a)) {
      // An enum value outside Algorithm has no name: show its number.
      const std::string name =
          toString(a) == "?" ? std::to_string(static_cast<int>(a)) : std::string(toString(a));
      throw Error(ErrorCode::kInvalidArgument,
                  "Options::algorithm: " + noSuchAlgorithm(collectiveAt(i), name));
    }
  }
}

}  // namespace algo
}  // namespace chorus
