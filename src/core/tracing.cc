// The communicator's side of the flight recorder: what it records per call, its dumps, and the
// registration of its progress records (trace/).
#include "core/communicator_access.h"
#include "core/communicator_impl.h"
#include "core/trace_subject.h"

#include "common/json.h"
#include "trace/clock.h"
#include "trace/json_out.h"
#include "trace/service.h"
#include "trace/stall_diagnosis.h"

#include <chorus/error.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <random>
#include <thread>

namespace chorus {

std::shared_ptr<trace::Subject> traceSubjectOf(const Communicator& comm) {
  const CommunicatorImpl& impl = CommunicatorAccess::of(comm);
  return impl.trace().recorder.enabled() ? impl.traceSubject() : nullptr;
}

void Communicator::Impl::initTrace() {
  uint64_t id = tx_ ? tx_->communicatorId() : 0;
  if (id == 0) {  // no peers, so nothing to agree with: any id that differs between communicators
    std::random_device rd;
    id = (uint64_t{rd()} << 32) ^ rd();
  }
  trace_ = std::make_shared<trace::Subject>(options.trace, id, rank, size);
  if (!trace_->recorder.enabled()) return;
  recorder_ = &trace_->recorder;
  if (tx_) tx_->attachRecorder(recorder_);
  if (!trace_->settings.dir.empty()) {
    recorder_->onTimeout(
        [](void* self, const OpDesc& op, const std::string& message) {
          auto* impl = static_cast<Impl*>(self);
          impl->traceFailure(
              Error(ErrorCode::kTimeout,
                    op.name() + " (rank " + std::to_string(impl->rank) + "): " + message));
        },
        this);
  }
}

void Communicator::Impl::startTracing(std::shared_ptr<Store> root) {
  if (!recorder_) return;
  if (options.progressStore) root = options.progressStore;
  const trace::Settings& s = trace_->settings;
  const bool publishes = root && size > 1 && s.progressSeconds > 0;
  if (s.heartbeatSeconds > 0 && !publishes && rank == 0 && size > 1) {
    std::fprintf(stderr,
                 "chorus[0]: no heartbeat (CHORUS_HEARTBEAT_SECONDS=%g): it needs the progress "
                 "records, which are off here (CHORUS_PROGRESS_SECONDS=0 or no store)\n",
                 s.heartbeatSeconds);
  }
  if (publishes) {
    trace_->rootStore = root;
    if (rank == 0) {
      try {
        const int64_t n = root->add("chorus/progress/count", 1);
        const std::string text = "{\"communicator\": " + json::quotedString(trace_->id) +
                                 ", \"size\": " + std::to_string(size) + "}";
        root->set("chorus/progress/comm/" + std::to_string(n),
                  Store::Bytes(text.begin(), text.end()));
      } catch (const Error& e) {
        std::fprintf(stderr, "chorus[0]: cannot register progress records: %s\n", e.what());
      }
    }
  }
  if (publishes) trace_->recordsSinceUs = trace::wallMicros();
  if (publishes && s.heartbeatSeconds > 0) watchHeartbeat();
  if (publishes || s.signal != 0) {
    trace::watch(trace_);
    watched_ = true;
  }
}

std::string Communicator::Impl::dumpTrace(const std::string& dir, const char* reason) {
  if (!recorder_) {
    throw Error(ErrorCode::kInvalidArgument,
                "dumpTrace: the flight recorder is off (CHORUS_TRACE_ENTRIES=0)");
  }
  const std::string& where = dir.empty() ? trace_->settings.dir : dir;
  if (where.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "dumpTrace: no directory given and CHORUS_TRACE_DIR is not set");
  }
  return trace::writeDump(*trace_, where, reason, nullptr);
}

void Communicator::Impl::traceFailure(const Error& e) {
  if (!recorder_ || trace_->settings.dir.empty()) return;
  recorder_->settle();  // runs on the driving thread: the failed call's entry, if not yet written
  const std::string message = e.what();
  try {
    trace::writeDump(*trace_, trace_->settings.dir,
                     e.code() == ErrorCode::kTimeout ? "timeout" : "failure", &message);
  } catch (const std::exception& failed) {
    std::fprintf(stderr, "chorus[%d]: %s\n", rank, failed.what());
  }
}

std::string Communicator::Impl::stallDiagnosis(const Task& task) const {
  const uint64_t startedAt = recorder_ ? recorder_->startedTicks(task.traceId) : 0;
  if (!recorder_ || !trace_->rootStore || startedAt == 0) return "";
  const OpDesc& d = task.args.desc;
  const uint64_t startedUs = trace::WallClock::now().micros(startedAt);
  // On a thread of its own, given a second: a store that is gone may make a read wait for its
  // whole timeout, and the failure must not wait for it.
  auto job = std::make_shared<std::packaged_task<std::string()>>(
      [subject = trace_, number = d.seq / 2, name = d.name(), started = startedUs] {
        return trace::stalledRanks(*subject, number, name, started);
      });
  std::future<std::string> answer = job->get_future();
  std::thread([job] { (*job)(); }).detach();
  if (answer.wait_for(std::chrono::seconds(1)) != std::future_status::ready) return "";
  try {
    return answer.get();
  } catch (const std::exception&) {
    return "";
  }
}

void Communicator::Impl::printStragglerReport() const {
  if (!recorder_) return;
  const std::string text =
      trace::stragglerText(recorder_->stragglers(trace::WallClock::now()), rank);
  if (!text.empty()) std::fputs(text.c_str(), stderr);
}

}  // namespace chorus
