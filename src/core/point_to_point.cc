// Sends and receives between the same two collectives run as one batch: while the first waits,
// the ones queued behind it are posted too. Each rank may then order its calls as it likes (a
// receive posted before a send, on both ranks of a pair, as torch's batch_isend_irecv does), where
// running them one by one would leave both ranks waiting in their receive until the timeout.
#include "core/communicator_impl.h"
#include "core/trace_calls.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <deque>
#include <vector>

namespace chorus {
namespace {

// How long a wait polls before it looks for sends and receives queued meanwhile: the delay a
// call issued while others are pending may see before it is posted. Short at first (calls of
// one batch come microseconds apart), doubling while nothing happens, so that a long wait
// neither spins nor wakes up often.
constexpr auto kFirstLook = std::chrono::milliseconds(1);
constexpr auto kLongestLook = std::chrono::milliseconds(64);

}  // namespace

void Communicator::Impl::executePointToPoint(Task& first) {
  std::deque<Task> adopted;  // popped from the queue: a deque keeps the tasks in place
  std::vector<Task*> tasks{&first};
  std::deque<transport::Request> requests;
  size_t finished = 0;  // tasks complete in issue order, like every call of a communicator
  auto post = [&](Task& t) {
    traceStart(t);
    transport::Request& r = requests.emplace_back();
    if (t.args.sending) {
      tx_->postSend(r, t.args.peer, t.args.in, t.args.bytes, 0);
    } else {
      tx_->postRecv(r, t.args.peer, t.args.out, t.args.bytes, 0);
    }
  };
  auto fail = [&](ErrorCode code, const std::string& what) {
    Error err(code, first.args.desc.name() + " (rank " + std::to_string(rank) + "): " + what);
    traceFailure(err);
    for (size_t i = finished; i < tasks.size(); ++i) traceEnd(*tasks[i], false);
    abortWith(err);  // aborts the transport first: the requests may go away after it
    for (size_t i = finished; i < tasks.size(); ++i) {
      finish(*tasks[i], std::make_exception_ptr(err));
    }
  };
  try {
    tx_->beginOp(first.args.desc);  // every send and receive between two collectives shares it
    post(first);
    Deadline stall = Deadline::after(options.timeout);  // renewed whenever one completes
    auto look = kFirstLook;
    for (;;) {
      bool progressed = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        while (!abortRequested_ && !queue_.empty() &&
               queue_.front().args.desc.kind == CollectiveKind::kSendRecv) {
          adopted.push_back(std::move(queue_.front()));
          queue_.pop_front();
          tasks.push_back(&adopted.back());
          progressed = true;
        }
      }
      while (requests.size() < tasks.size()) post(*tasks[requests.size()]);
      while (finished < tasks.size() && requests[finished].done()) {
        traceEnd(*tasks[finished], true);
        finish(*tasks[finished++], nullptr);
        progressed = true;
      }
      if (finished == tasks.size()) return;
      if (progressed) {
        stall = Deadline::after(options.timeout);
        look = kFirstLook;
      }
      transport::Request& next = requests[finished];
      if (stall.expired()) {
        tx_->wait(next, stall);  // throws the timeout, naming what this rank waits for
        continue;
      }
      const auto left = std::chrono::milliseconds(stall.remainingMs() + 1);
      tx_->pollStuckOn(next, Deadline::after(std::min(look, left)));
      look = std::min(look * 2, kLongestLook);
    }
  } catch (const Error& e) {
    fail(e.code(), e.what());
  } catch (const std::exception& e) {
    fail(ErrorCode::kInternal, e.what());
  }
}

}  // namespace chorus
