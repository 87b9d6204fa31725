// The launchers' variables: rank, size, local rank and size, and the store address, from
// chorus-run, torchrun, Open MPI, MPICH's Hydra and Slurm, in the documented order.
#include "core/launch_env.h"
#include "core/slurm_env.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.h>
#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/launch.hpp>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace chorus {
namespace {

const char* kLaunchVars[] = {"CHORUS_RANK",
                             "CHORUS_WORLD_SIZE",
                             "CHORUS_LOCAL_RANK",
                             "CHORUS_LOCAL_SIZE",
                             "CHORUS_STORE",
                             "TORCHELASTIC_RUN_ID",
                             "RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "PMI_RANK",
                             "PMI_SIZE",
                             "MPI_LOCALRANKID",
                             "MPI_LOCALNRANKS",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_LOCALID",
                             "SLURM_NODEID",
                             "SLURM_TASKS_PER_NODE",
                             "SLURM_STEP_TASKS_PER_NODE",
                             "SLURM_JOB_ID",
                             "SLURM_STEP_ID",
                             "SLURM_JOB_NODELIST",
                             "SLURM_STEP_NODELIST"};

// A clean launch environment for one test.
struct CleanEnv : ScopedEnv {
  CleanEnv() {
    for (const char* v : kLaunchVars) set(v, nullptr);
  }
};

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LaunchEnv, ChorusThenOpenMpiThenHydraThenSlurm) {
  CleanEnv env;
  env.set("CHORUS_STORE", "tcp://127.0.0.1:1234");
  env.set("SLURM_PROCID", "3");
  env.set("SLURM_NTASKS", "8");
  EXPECT_EQ(readLaunchInfo().rank, 3);
  EXPECT_EQ(readLaunchInfo().launcher, "Slurm");
  env.set("PMI_RANK", "2");
  env.set("PMI_SIZE", "4");
  EXPECT_EQ(readLaunchInfo().rank, 2);
  EXPECT_EQ(readLaunchInfo().launcher, "MPICH (Hydra)");
  env.set("OMPI_COMM_WORLD_RANK", "1");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(readLaunchInfo().size, 2);
  EXPECT_EQ(readLaunchInfo().launcher, "Open MPI");
  env.set("CHORUS_RANK", "0");
  env.set("CHORUS_WORLD_SIZE", "5");
  LaunchInfo e = readLaunchInfo();
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 5);
  EXPECT_EQ(e.launcher, "chorus");
  EXPECT_EQ(e.store, "tcp://127.0.0.1:1234");
  EXPECT_EQ(e.storeFrom, "CHORUS_STORE");
}

TEST(LaunchEnv, LocalRankAndSizeFromEachLauncher) {
  CleanEnv env;
  env.set("CHORUS_STORE", "tcp://127.0.0.1:1234");
  env.set("OMPI_COMM_WORLD_RANK", "5");
  env.set("OMPI_COMM_WORLD_SIZE", "6");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
  LaunchInfo i = readLaunchInfo();
  EXPECT_EQ(i.localRank, 2);
  EXPECT_EQ(i.localSize, 3);
  // Another launcher's local variables do not leak in: Hydra's rank with Open MPI's locals unset.
  CleanEnv hydra;
  hydra.set("CHORUS_STORE", "tcp://127.0.0.1:1234");
  hydra.set("PMI_RANK", "1");
  hydra.set("PMI_SIZE", "4");
  hydra.set("OMPI_COMM_WORLD_LOCAL_RANK", "3");
  EXPECT_EQ(readLaunchInfo().localRank, -1);
  hydra.set("MPI_LOCALRANKID", "1");
  hydra.set("MPI_LOCALNRANKS", "2");
  EXPECT_EQ(readLaunchInfo().localRank, 1);
  EXPECT_EQ(readLaunchInfo().localSize, 2);
  // CHORUS_LOCAL_* override the launcher's.
  hydra.set("CHORUS_LOCAL_RANK", "0");
  hydra.set("CHORUS_LOCAL_SIZE", "4");
  EXPECT_EQ(readLaunchInfo().localRank, 0);
  EXPECT_EQ(readLaunchInfo().localSize, 4);
}

TEST(LaunchEnv, SlurmLocalSizeFromTheStepsTasksPerNode) {
  CleanEnv env;
  env.set("CHORUS_STORE", "tcp://127.0.0.1:1234");
  env.set("SLURM_PROCID", "6");
  env.set("SLURM_NTASKS", "7");
  env.set("SLURM_LOCALID", "0");
  env.set("SLURM_NODEID", "3");
  env.set("SLURM_TASKS_PER_NODE", "4(x2)");  // the job's allocation
  env.set("SLURM_STEP_TASKS_PER_NODE", "2(x3),1");
  LaunchInfo i = readLaunchInfo();
  EXPECT_EQ(i.localRank, 0);
  EXPECT_EQ(i.localSize, 1);
  env.set("SLURM_NODEID", "1");
  env.set("SLURM_LOCALID", "1");
  EXPECT_EQ(readLaunchInfo().localSize, 2);
  EXPECT_EQ(readLaunchInfo().localRank, 1);
  env.set("SLURM_STEP_TASKS_PER_NODE", nullptr);
  EXPECT_EQ(readLaunchInfo().localSize, 4);
}

TEST(LaunchEnv, SlurmDerivesTheStoreFromTheJob) {
  CleanEnv env;
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "4");
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("SLURM_JOB_ID"), std::string::npos);
  env.set("SLURM_JOB_ID", "1234");
  env.set("SLURM_STEP_ID", "2");
  env.set("SLURM_JOB_NODELIST", "node[07-09],gpu1");
  LaunchInfo i = readLaunchInfo();
  EXPECT_EQ(i.store, "tcp://node07:" + std::to_string(20000 + (1234 * 16 + 2) % 12000));
  EXPECT_EQ(i.storeFrom, "Slurm job 1234 step 2");
  // The step's nodes, when the step runs on part of the job's.
  env.set("SLURM_STEP_NODELIST", "node[08-09]");
  EXPECT_EQ(readLaunchInfo().store.rfind("tcp://node08:", 0), 0u);
  // CHORUS_STORE wins.
  env.set("CHORUS_STORE", "tcp://10.1.2.3:555");
  EXPECT_EQ(readLaunchInfo().store, "tcp://10.1.2.3:555");
  EXPECT_EQ(readLaunchInfo().storeFrom, "CHORUS_STORE");
}

TEST(LaunchEnv, TorchrunComesBeforeTheSlurmStepThatStartedIt) {
  CleanEnv env;
  // srun started one torchrun per node: SLURM_PROCID numbers nodes, RANK numbers workers.
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "2");
  env.set("SLURM_JOB_ID", "77");
  env.set("SLURM_JOB_NODELIST", "n[1-2]");
  env.set("TORCHELASTIC_RUN_ID", "abc");
  env.set("RANK", "5");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_RANK", "1");
  env.set("LOCAL_WORLD_SIZE", "4");
  env.set("MASTER_ADDR", "n1");
  env.set("MASTER_PORT", "29500");
  LaunchInfo i = readLaunchInfo();
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localSize, 4);
  EXPECT_EQ(i.store, "tcp://n1:29501");
  EXPECT_EQ(i.storeFrom, "MASTER_ADDR, MASTER_PORT + 1");
}

TEST(LaunchEnv, PlainRankCountsOnlyBesideMasterAddrAndAfterTheLaunchers) {
  CleanEnv env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  EXPECT_TRUE(launchedAlone());  // RANK alone is too common a name to trust
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29400");
  EXPECT_FALSE(launchedAlone());
  EXPECT_EQ(readLaunchInfo().launcher, "RANK/WORLD_SIZE");
  EXPECT_EQ(readLaunchInfo().store, "tcp://127.0.0.1:29401");
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "3");
  env.set("CHORUS_STORE", "tcp://127.0.0.1:1");
  EXPECT_EQ(readLaunchInfo().launcher, "Open MPI");
}

TEST(LaunchEnv, MpiWithoutAStoreSaysHowToPassOne) {
  CleanEnv env;
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("mpirun -x CHORUS_STORE="), std::string::npos);
  CleanEnv hydra;
  hydra.set("PMI_RANK", "0");
  hydra.set("PMI_SIZE", "2");
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("-genv CHORUS_STORE"), std::string::npos);
}

TEST(LaunchEnv, NothingSetMeansAlone) {
  CleanEnv env;
  EXPECT_TRUE(launchedAlone());
  LaunchInfo alone = launchInfoFromEnv();
  EXPECT_EQ(alone.launcher, "alone");
  EXPECT_EQ(alone.size, 1);
  EXPECT_EQ(alone.localSize, 1);
  env.set("SLURM_PROCID", "0");
  EXPECT_FALSE(launchedAlone());  // a half-set launcher is an error below, never a singleton
  env.set("SLURM_PROCID", nullptr);
  env.set("CHORUS_STORE", "tcp://127.0.0.1:1");
  EXPECT_FALSE(launchedAlone());
}

TEST(LaunchEnv, AloneGivesAWorldOfOne) {
  CleanEnv env;
  auto comm = Communicator::fromEnv();
  ASSERT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->rank(), 0);
  std::vector<float> x{1.5f, -2.0f};
  comm->allReduce(std::span<float>(x), ReduceOp::kAvg).wait();
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
}

// A process started as a replacement (CHORUS_JOIN=1) joins only where the program asks for it by
// name (fromEnvOrJoin, chorus_comm_init_from_env_or_join); fromEnv refuses and says what to call.
// 0.1's chorus_comm_init_from_env keeps joining (tests/capi_compat).
TEST(LaunchEnv, OnlyFromEnvOrJoinJoins) {
  CleanEnv env;
  TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  env.set("CHORUS_STORE", url.c_str());
  env.set("CHORUS_RANK", "1");
  env.set("CHORUS_WORLD_SIZE", "2");
  env.set("CHORUS_JOIN", "1");
  const std::string refused = errorOf([] { Communicator::fromEnv(); });
  EXPECT_NE(refused.find("CHORUS_JOIN=1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("fromEnvOrJoin"), std::string::npos) << refused;
  chorus_comm* comm = nullptr;
  EXPECT_EQ(chorus_comm_init_from_env(&comm), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(chorus_last_error(nullptr)).find("chorus_comm_init_from_env_or_join"),
            std::string::npos)
      << chorus_last_error(nullptr);
  // No job runs on this store, so the join waits for a membership change that never comes.
  const auto start = std::chrono::steady_clock::now();
  Options shortWait = Options::fromEnv();
  shortWait.timeout = std::chrono::milliseconds(300);
  const std::string joined = errorOf([&] { Communicator::fromEnvOrJoin(shortWait); });
  EXPECT_NE(joined.find("join"), std::string::npos) << joined;
  chorus_options c{};
  c.struct_size = sizeof(c);
  c.timeout_ms = 300;
  EXPECT_EQ(chorus_comm_init_from_env_or_join(&c, &comm), CHORUS_ERR_TIMEOUT)
      << chorus_last_error(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // Not a replacement: fromEnvOrJoin creates, as fromEnv does (a world of one here).
  env.set("CHORUS_JOIN", nullptr);
  env.set("CHORUS_STORE", nullptr);
  env.set("CHORUS_RANK", nullptr);
  env.set("CHORUS_WORLD_SIZE", nullptr);
  EXPECT_EQ(Communicator::fromEnvOrJoin()->size(), 1);
}

TEST(LaunchEnv, MissingOrBadValuesSayWhat) {
  CleanEnv env;
  EXPECT_THROW(readLaunchInfo(), Error);
  env.set("CHORUS_RANK", "4");
  env.set("CHORUS_WORLD_SIZE", "4");  // rank out of range
  env.set("CHORUS_STORE", "tcp://x:1");
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_RANK='4'"), std::string::npos);
  env.set("CHORUS_RANK", "1");
  env.set("CHORUS_LOCAL_SIZE", "2");
  env.set("CHORUS_LOCAL_RANK", "2");  // not below the local size
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_LOCAL_RANK='2'"), std::string::npos);
  env.set("CHORUS_LOCAL_RANK", "x");
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_LOCAL_RANK='x'"), std::string::npos);
  env.set("CHORUS_LOCAL_RANK", nullptr);
  env.set("CHORUS_LOCAL_SIZE", "9");  // above the world size
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_LOCAL_SIZE='9'"), std::string::npos);
  env.set("CHORUS_LOCAL_SIZE", nullptr);
  env.set("CHORUS_STORE", nullptr);
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_STORE"), std::string::npos);
  env.set("CHORUS_WORLD_SIZE", nullptr);
  EXPECT_NE(errorOf([] { readLaunchInfo(); }).find("CHORUS_WORLD_SIZE is not set"),
            std::string::npos);
}

TEST(LaunchEnv, TheCApiGivesTheSame) {
  CleanEnv env;
  env.set("SLURM_PROCID", "2");
  env.set("SLURM_NTASKS", "3");
  env.set("SLURM_LOCALID", "0");
  env.set("SLURM_NODEID", "1");
  env.set("SLURM_TASKS_PER_NODE", "2,1");
  env.set("SLURM_JOB_ID", "9");
  env.set("SLURM_JOB_NODELIST", "a[1-2]");
  chorus_launch_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(chorus_get_launch_info(&info), CHORUS_OK) << chorus_last_error(nullptr);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 3);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
  EXPECT_STREQ(info.launcher, "Slurm");
  EXPECT_EQ(std::string(info.store), "tcp://a1:" + std::to_string(20000 + 9 * 16));
  EXPECT_STREQ(info.store_from, "Slurm job 9 step 0");
  // A store URL longer than the field is an error, not a silently cut address.
  env.set("CHORUS_STORE", ("tcp://" + std::string(300, 'h') + ":1").c_str());
  EXPECT_EQ(chorus_get_launch_info(&info), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(chorus_last_error(nullptr)).find("longer than the field"),
            std::string::npos);
  chorus_launch_info small{};
  small.struct_size = 8;
  EXPECT_EQ(chorus_get_launch_info(&small), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(chorus_get_launch_info(nullptr), CHORUS_ERR_INVALID_ARGUMENT);
}

TEST(SlurmEnv, FirstHostOfAHostList) {
  EXPECT_EQ(slurm::firstHost("vm"), "vm");
  EXPECT_EQ(slurm::firstHost("node[07-12,20],gpu1"), "node07");
  EXPECT_EQ(slurm::firstHost("gpu1,node[07-12]"), "gpu1");
  EXPECT_EQ(slurm::firstHost("node[3,1-2]"), "node3");
  EXPECT_EQ(slurm::firstHost("rack[2-3]-n[01-04]"), "rack2-n01");
  EXPECT_EQ(slurm::firstHost("a.example.org"), "a.example.org");
  for (const char* bad : {"", "node[1-2", "node1-2]", "n[[1]]", ",node1"}) {
    EXPECT_THROW(slurm::firstHost(bad), Error) << bad;
  }
}

TEST(SlurmEnv, TasksOnNode) {
  EXPECT_EQ(slurm::tasksOnNode("4", 0), 4);
  EXPECT_EQ(slurm::tasksOnNode("4", 1), -1);
  EXPECT_EQ(slurm::tasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(slurm::tasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(slurm::tasksOnNode("2(x3),1", 3), 1);
  EXPECT_EQ(slurm::tasksOnNode("2(x3),1", 4), -1);
  for (const char* bad : {"", "x", "2(3)", "2(x)", "2(x0)", "2(x3", ",2"}) {
    EXPECT_EQ(slurm::tasksOnNode(bad, 0), -1) << bad;
  }
}

TEST(SlurmEnv, StorePortStaysBelowTheEphemeralRangeAndDiffersPerStep) {
  EXPECT_EQ(slurm::storePort(0, 0), 20000);
  EXPECT_NE(slurm::storePort(1234, 0), slurm::storePort(1234, 1));
  EXPECT_NE(slurm::storePort(1234, 0), slurm::storePort(1235, 0));
  for (uint64_t job : {0ull, 1ull, 749ull, 123456789ull, (1ull << 62)}) {
    for (uint64_t step : {0ull, 1ull, 4294967294ull}) {
      const int port = slurm::storePort(job, step);
      EXPECT_GE(port, 20000);
      EXPECT_LT(port, 32768);
    }
  }
}

}  // namespace
}  // namespace chorus
