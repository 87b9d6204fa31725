// mpi_bench: MPI_Allreduce (MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) measured with chorus-bench's
// definitions (common.h). Out of place by default (send buffer != receive buffer), like
// chorus-bench; --in-place uses MPI_IN_PLACE on the receive buffer instead.
//
// Built twice by bench/compare/CMakeLists.txt: mpi_bench_openmpi (Open MPI) and mpi_bench_mpich
// (MPICH); the same source, each launched by its own implementation's mpirun/mpiexec.
//
//   mpirun.openmpi -np 4 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
//       mpi_bench_openmpi --system openmpi-tcp --min-bytes 8 --max-bytes 64M --json f.json
//
// --system sets the JSON "system" label (default "openmpi" or "mpich", after the library); the
// transport is whatever the launcher selected, which this program cannot see: run.sh passes, with
// --transport, the description that matches its launcher flags.
#include "common.h"

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  compare::Config cfg;
#ifdef MPICH_VERSION
  cfg.system = "mpich";
#else
  cfg.system = "openmpi";
#endif
  bool inPlace = false;
  std::string transport;
  int rc = 0;
  try {
    compare::parseArgs(argc, argv, cfg, [&](int i, char** av) -> int {
      std::string a = av[i];
      if (a == "--in-place") return inPlace = true, 1;
      if (i + 1 >= argc) return 0;
      if (a == "--system") return cfg.system = av[i + 1], 2;
      if (a == "--transport") return transport = av[i + 1], 2;
      return 0;
    });
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    if (auto nl = v.find_first_of("\n,"); nl != std::string::npos) v.resize(nl);
    std::replace(v.begin(), v.end(), '\t', ' ');
    cfg.algo = "MPI_Allreduce";
    cfg.notes = std::string(inPlace ? "MPI_IN_PLACE" : "out of place") + "; " + v +
                (transport.empty() ? "" : "; " + transport);

    compare::Backend be;
    be.rank = rank;
    be.size = size;
    be.inPlace = inPlace;
    be.allReduce = [&](float* in, float* out, size_t count) {
      int e = MPI_Allreduce(inPlace ? MPI_IN_PLACE : in, out, static_cast<int>(count), MPI_FLOAT,
                            MPI_SUM, MPI_COMM_WORLD);
      if (e != MPI_SUCCESS) throw std::runtime_error("MPI_Allreduce failed");
    };
    be.maxOverRanks = [](std::vector<double>& t) {
      MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX,
                    MPI_COMM_WORLD);
    };
    be.sumOverRanks = [](int64_t x) {
      MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      return x;
    };
    const long wrong = compare::runAndReport(be, cfg, rank, size);
    rc = wrong == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_bench: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
