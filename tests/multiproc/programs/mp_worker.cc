// Rank program for collectives_mp_test: runs collectives through the C API as argv[1] says and
// prints one "RESULT rank=R case=C status=S [key=value ...] msg=<chorus_last_error>" line per
// checked call (msg= always comes last and runs to the end of the line).
//   correct                 every collective over many counts, dtypes and ops, in and out of
//                           place, blocking and not, checked bit for bit against a reference and
//                           across ranks; exit 0, 1 on an error status, 2 on wrong data
//   kill K [MIB] [DELAY_MS] [LINGER_MS]
//                           loop an in-place all-reduce of MIB MiB (default 16); rank K SIGKILLs
//                           itself DELAY_MS (default 300) after the loop starts; the others
//                           report how they failed and exit 1 LINGER_MS (default 1000) later
//   exit-early K [SETTLE_MS]
//                           after two good collectives and a pause of SETTLE_MS (default 300)
//                           rank K destroys its communicator and exits 0; the others run one
//                           more all-reduce and report how it failed
//   mismatch-count|-op|-dtype|-collective|-root [odd|one] [COUNT] [SETTLE_MS]
//                           after two good collectives and a pause of SETTLE_MS (default 300),
//                           rank 1 (with "odd": every odd rank) calls a different collective
//                           (of COUNT elements, default 1000); every rank reports that call
//                           and the one after it
//   invalid                 invalid calls (rank 0 makes each twice), then a valid all-reduce
//   garbage [A]             rank A (default the last) sends garbage to the other ranks' listening
//                           ports during setup and while they run collectives, and to the store
// Every rank ignores SIGTERM so that it can still report after chorus-run saw another rank fail.
#include "mp_worker/modes.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

using namespace mpworker;

int main(int argc, char** argv) {
  alarm(60);                 // never outlive a broken test by much
  signal(SIGTERM, SIG_IGN);  // report even after chorus-run began stopping the job
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };

  if (mode == "garbage") return runGarbage(arg(2, -1));
  if (mode != "correct" && mode != "kill" && mode != "exit-early" && mode != "invalid" &&
      mode.rfind("mismatch-", 0) != 0) {
    say("mp_worker: unknown mode '" + mode + "'");
    return 64;
  }
  Ctx c = init();
  if (mode == "correct") return runCorrect(c);
  if (mode == "kill") {
    return runKill(c, arg(2, 1), arg(3, 16), arg(4, 300), arg(5, 1000),
                   argc > 6 ? argv[6] : "allreduce");
  }
  if (mode == "exit-early") return runExitEarly(c, arg(2, 1), arg(3, 300));
  if (mode == "invalid") return runInvalid(c);
  return runMismatch(c, mode.substr(9), argc > 2 && std::string(argv[2]) == "odd",
                     static_cast<size_t>(arg(3, 1000)), arg(4, 300));
}
