// The recorder's settings given in code (Options::trace) reach it whatever the environment says,
// and a split inherits its parent's unless given its own.
#include "trace/trace_util.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <filesystem>

namespace chorus::testing {
namespace {

void allReduceOnce(Communicator& comm) {
  float x = 1, y = 0;
  comm.allReduce(&x, &y, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
}

// One rank, with these options; the environment turns the recorder off and names no directory,
// so whatever works below came from the options.
std::unique_ptr<Communicator> alone(const Options& o) {
  return Communicator::create(makeHashStore(), 0, 1, o);
}

TEST(TraceOptions, SetInCodeTheyWinOverTheEnvironment) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_ENTRIES", "0");
  env.set("CHORUS_TRACE_DIR", nullptr);
  ScratchDir dir;
  Options o;  // recorder on by default
  o.trace.dir = dir.path();
  o.trace.progressSeconds = 0;
  auto comm = alone(o);
  allReduceOnce(*comm);
  const std::string path = comm->dumpTrace();  // into o.trace.dir
  EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(dir.path()));
  EXPECT_TRUE(std::filesystem::exists(path)) << path;

  o.trace.entries = 0;
  auto off = alone(o);
  allReduceOnce(*off);
  EXPECT_THROW(off->dumpTrace(dir.path()), Error);
}

TEST(TraceOptions, FromTheEnvironmentThroughOptionsFromEnv) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_ENTRIES", "0");
  ScratchDir dir;
  auto comm = alone(Options::fromEnv());
  allReduceOnce(*comm);
  EXPECT_THROW(comm->dumpTrace(dir.path()), Error);
}

TEST(TraceOptions, SplitInheritsItsParentsUnlessGivenItsOwn) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_ENTRIES", nullptr);
  ScratchDir dir;
  Options o;
  o.trace.entries = 0;
  o.trace.progressSeconds = 0;
  auto parent = alone(o);
  auto child = parent->split(0, 0);
  allReduceOnce(*child);
  EXPECT_THROW(child->dumpTrace(dir.path()), Error);
  Options on = o;
  on.trace.entries = 16;
  auto recorded = parent->split(0, 0, on);
  allReduceOnce(*recorded);
  EXPECT_TRUE(std::filesystem::exists(recorded->dumpTrace(dir.path())));
}

}  // namespace
}  // namespace chorus::testing
