// Environment parsing: Options::fromEnv (launch_env_test.cc: the launchers' variables).
#include "unit/scoped_env.h"

#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus {
namespace {

TEST(Options, DefaultsAndOverrides) {
  ScopedEnv env;
  for (const char* v : {"CHORUS_TIMEOUT", "CHORUS_ALGO", "CHORUS_SEGMENT_BYTES", "CHORUS_IFNAME",
                        "CHORUS_TUNING_FILE", "CHORUS_RING_BIDIR_BYTES"}) {
    env.set(v, nullptr);
  }
  Options d = Options::fromEnv();
  EXPECT_EQ(d.timeout, std::chrono::seconds(300));
  EXPECT_EQ(d.algorithm, AlgorithmSetting{});
  EXPECT_EQ(toString(d.algorithm), "auto");
  EXPECT_EQ(d.tuning.ringBidirectionalBytes, 0);
  env.set("CHORUS_TIMEOUT", "0.5");
  env.set("CHORUS_RING_BIDIR_BYTES", "4194304");
  env.set("CHORUS_ALGO", "rhd");
  env.set("CHORUS_SEGMENT_BYTES", "65536");
  Options o = Options::fromEnv();
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(500));
  AlgorithmSetting rhd;
  rhd[Collective::kAllReduce] = Algorithm::kHalvingDoubling;
  EXPECT_EQ(o.algorithm, rhd);
  EXPECT_EQ(o.segmentBytes, 65536u);
  EXPECT_EQ(o.tuning.ringBidirectionalBytes, 4194304);
}

TEST(Options, EveryAlgorithmName) {
  ScopedEnv env;
  for (const char* name : {"auto", "ring", "rd", "rhd", "hier", "oneshot", "twoshot", "tree"}) {
    env.set("CHORUS_ALGO", name);
    EXPECT_EQ(toString(Options::fromEnv().algorithm), name);
  }
}

TEST(Options, TransportAndHostSettings) {
  ScopedEnv env;
  for (const char* v : {"CHORUS_TRANSPORT", "CHORUS_HOST_ID", "CHORUS_SHM_RING_BYTES",
                        "CHORUS_SHM_SINGLE_COPY_BYTES"}) {
    env.set(v, nullptr);
  }
  Options d = Options::fromEnv();
  EXPECT_EQ(d.transport, TransportKind::kAuto);
  EXPECT_EQ(d.hostId, "");
  EXPECT_EQ(d.shmRingBytes, 1024u * 1024);
  EXPECT_EQ(d.shmSingleCopyBytes, 0u);
  env.set("CHORUS_TRANSPORT", "tcp");
  env.set("CHORUS_HOST_ID", "rack1-node7");
  env.set("CHORUS_SHM_RING_BYTES", "65536");
  env.set("CHORUS_SHM_SINGLE_COPY_BYTES", "1048576");
  env.set("CHORUS_ALGO", "hier");
  Options o = Options::fromEnv();
  EXPECT_EQ(o.transport, TransportKind::kTcp);
  EXPECT_EQ(o.hostId, "rack1-node7");
  EXPECT_EQ(o.shmRingBytes, 65536u);
  EXPECT_EQ(o.shmSingleCopyBytes, 1048576u);
  EXPECT_EQ(o.algorithm[Collective::kAllReduce], Algorithm::kHierarchical);
}

TEST(Options, MalformedValuesAreClearErrors) {
  const std::pair<const char*, const char*> bad[] = {
      {"CHORUS_TIMEOUT", "soon"},       {"CHORUS_TIMEOUT", "-1"},
      {"CHORUS_ALGO", "fastest"},       {"CHORUS_SEGMENT_BYTES", "12abc"},
      {"CHORUS_SEGMENT_BYTES", "1"},    {"CHORUS_DEBUG", "yes"},
      {"CHORUS_TRANSPORT", "rdma"},     {"CHORUS_SHM_RING_BYTES", "100"},
      {"CHORUS_RING_BIDIR_BYTES", "-1"}};
  for (auto [name, value] : bad) {
    ScopedEnv env;
    env.set(name, value);
    try {
      Options::fromEnv();
      ADD_FAILURE() << name << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// What each collective may be forced to, as docs/config.md lists it.
const std::map<std::string, std::vector<std::string>> kChoices = {
    {"allreduce", {"ring", "rd", "rhd", "tree", "oneshot", "twoshot", "hier"}},
    {"reduce_scatter", {"ring", "halving"}},
    {"all_gather", {"ring", "doubling"}},
    {"broadcast", {"chain", "binomial", "scatter_allgather"}},
    {"barrier", {"dissemination"}},
    {"reduce", {"binomial", "ring_gather"}},
    {"gather", {"direct"}},
    {"scatter", {"direct"}},
    {"all_gather_v", {"ring"}},
    {"reduce_scatter_v", {"ring"}},
    {"all_to_all", {"pairwise"}},
    {"all_to_all_v", {"pairwise"}},
    {"send_recv", {"direct"}}};
const char* kAlgorithmNames[] = {
    "auto",        "ring",    "rd",       "rhd",   "tree",     "oneshot",           "twoshot",
    "hier",        "halving", "doubling", "chain", "binomial", "scatter_allgather", "dissemination",
    "ring_gather", "direct",  "pairwise"};

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return name == "auto" || std::find(names.begin(), names.end(), name) != names.end();
}

TEST(AlgorithmSetting, AcceptsExactlyEachCollectivesChoices) {
  ASSERT_EQ(kChoices.size(), kNumCollectives);
  for (size_t i = 0; i < kNumCollectives; ++i) {
    const auto c = static_cast<Collective>(i);
    const std::string collective(toString(c));
    ASSERT_TRUE(kChoices.count(collective)) << collective;
    for (const std::string name : kAlgorithmNames) {
      const std::string text = collective + "=" + name;
      SCOPED_TRACE(text);
      if (!listed(kChoices.at(collective), name)) {
        EXPECT_THROW(parseAlgorithmSetting(text), Error);
        continue;
      }
      const AlgorithmSetting s = parseAlgorithmSetting(text);
      EXPECT_EQ(toString(s[c]), name);
      for (size_t j = 0; j < kNumCollectives; ++j) {
        if (j != i) {
          EXPECT_EQ(s.forced[j], Algorithm::kAuto) << j;
        }
      }
      EXPECT_EQ(parseAlgorithmSetting(toString(s)), s);
    }
  }
}

TEST(AlgorithmSetting, TextFormsAndRoundTrip) {
  EXPECT_EQ(parseAlgorithmSetting("auto"), AlgorithmSetting{});
  EXPECT_EQ(parseAlgorithmSetting(""), AlgorithmSetting{});
  EXPECT_EQ(toString(AlgorithmSetting{}), "auto");
  // A bare name is the all-reduce's and prints bare.
  EXPECT_EQ(parseAlgorithmSetting("tree")[Collective::kAllReduce], Algorithm::kDoubleTree);
  EXPECT_EQ(toString(parseAlgorithmSetting("allreduce=tree")), "tree");
  // Lists print in the order of Collective, without spaces or automatic entries.
  const AlgorithmSetting two =
      parseAlgorithmSetting(" broadcast = chain , allreduce=tree,reduce=auto,");
  EXPECT_EQ(two[Collective::kBroadcast], Algorithm::kChain);
  EXPECT_EQ(two[Collective::kAllReduce], Algorithm::kDoubleTree);
  EXPECT_EQ(toString(two), "allreduce=tree,broadcast=chain");
  EXPECT_EQ(parseAlgorithmSetting(toString(two)), two);
  // Other spellings of a collective; a later entry for the same collective wins.
  EXPECT_EQ(parseAlgorithmSetting("reducescatter=halving"),
            parseAlgorithmSetting("reduce-scatter=halving"));
  EXPECT_EQ(parseAlgorithmSetting("allreduce=ring,allreduce=auto"), AlgorithmSetting{});
  EXPECT_EQ(toString(parseAlgorithmSetting("reduce_scatter=ring,allreduce=auto")),
            "reduce_scatter=ring");
  // Every collective forced at once survives the trip.
  AlgorithmSetting all;
  for (size_t i = 0; i < kNumCollectives; ++i) {
    const auto c = static_cast<Collective>(i);
    all[c] = parseAlgorithmSetting(std::string(toString(c)) + "=" +
                                   kChoices.at(std::string(toString(c))).back())[c];
  }
  EXPECT_EQ(parseAlgorithmSetting(toString(all)), all);
  EXPECT_EQ(toString(all).find("auto"), std::string::npos) << toString(all);
}

TEST(AlgorithmSetting, ErrorsNameTheTextAndTheChoices) {
  const std::pair<const char*, const char*> bad[] = {
      {"fastest",
       "allreduce has no algorithm 'fastest' (choices: auto, ring, rd, rhd, tree, "
       "oneshot, twoshot, hier)"},
      {"all_gather=tree", "all_gather has no algorithm 'tree' (choices: auto, ring, doubling)"},
      {"allreduce=chain", "allreduce has no algorithm 'chain'"},
      {"broadcast=", "broadcast has no algorithm ''"},
      {"allgatherx=ring", "unknown collective 'allgatherx' (allreduce, reduce_scatter"},
      {"=ring", "unknown collective ''"},
      {"ring,barrier=ring", "barrier has no algorithm 'ring' (choices: auto, dissemination)"}};
  for (auto [text, why] : bad) {
    try {
      (void)parseAlgorithmSetting(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string what = e.what();
      EXPECT_NE(what.find("CHORUS_ALGO='" + std::string(text) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  }
}

TEST(Options, TransportAndDebugNamesRoundTrip) {
  for (TransportKind k : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kShm}) {
    EXPECT_EQ(parseTransportKind(toString(k)), k) << toString(k);
  }
  for (DebugLevel d : {DebugLevel::kOff, DebugLevel::kRank0, DebugLevel::kAll}) {
    EXPECT_EQ(parseDebugLevel(toString(d)), d) << toString(d);
  }
  EXPECT_EQ(parseTransportKind("shm"), TransportKind::kShm);
  EXPECT_EQ(parseDebugLevel("1"), DebugLevel::kRank0);
  EXPECT_EQ(parseDebugLevel("all"), DebugLevel::kAll);
  for (const char* bad : {"", "TCP", "tcp ", "ib"}) {
    EXPECT_THROW(parseTransportKind(bad), Error) << "'" << bad << "'";
  }
  for (const char* bad : {"", "2", "ALL", "yes"}) {
    EXPECT_THROW(parseDebugLevel(bad), Error) << "'" << bad << "'";
  }
  ScopedEnv env;
  env.set("CHORUS_DEBUG", "all");
  env.set("CHORUS_TRANSPORT", "shm");
  Options o = Options::fromEnv();
  EXPECT_EQ(o.debug, DebugLevel::kAll);
  EXPECT_EQ(o.transport, TransportKind::kShm);
  env.set("CHORUS_DEBUG", "0");
  EXPECT_EQ(Options::fromEnv().debug, DebugLevel::kOff);
}

}  // namespace
}  // namespace chorus
