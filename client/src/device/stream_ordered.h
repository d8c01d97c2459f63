// StreamOrdered: work that must wait until a CUDA stream has done what was queued on it so
// far (a lease ended, an allocation cancelled, slab references dropped), without blocking
// the host. A host function (cuLaunchHostFunc) marks the point in the stream; since a host
// function may make no CUDA call and must not hold up its stream, it only hands the work to
// a thread of this process, which runs each piece in the order the host functions ran.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "device/device_memory_mapper.h"
#include "hurray/error.h"

namespace hurray::client_internal {

// A piece of work to run once a stream reaches it.
class StreamOrderedTask {
 public:
  virtual ~StreamOrderedTask() = default;
  virtual void Run() = 0;
};

class StreamOrdered {
 public:
  StreamOrdered() = default;
  // Runs what is queued, then stops the thread. Work whose host function has not run yet
  // is never run: the stream still holds it.
  ~StreamOrdered();
  StreamOrdered(const StreamOrdered&) = delete;
  StreamOrdered& operator=(const StreamOrdered&) = delete;

  // This process's, never destroyed (a stream may run a host function at any time).
  static StreamOrdered& ForProcess();

  // Runs `task` on the thread once the work queued on `stream` (of device `device_ordinal`'s
  // contexts, null for its legacy stream) before this call is done. Takes `task` only on
  // success; the driver's error (through `mapper`) otherwise. A stream whose context fails
  // never runs its host functions: the task then never runs.
  [[nodiscard]] Status After(DeviceMemoryMapper& mapper, void* stream, int device_ordinal,
                             std::unique_ptr<StreamOrderedTask>& task);

  // Tasks handed over and not yet run; for tests.
  [[nodiscard]] std::size_t queued() const;

 private:
  static void HostFunction(void* data);
  void Push(std::unique_ptr<StreamOrderedTask> task);
  void Run();

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::unique_ptr<StreamOrderedTask>> queue_;  // Guarded by mutex_.
  bool stopping_ = false;                                 // Guarded by mutex_.
  std::size_t running_ = 0;                               // Guarded by mutex_.
  std::thread thread_;
};

// Hands `state` to a task that runs `end(std::move(state))` once the work queued on `stream`
// (of device `device_ordinal`, reached through `mapper`) so far is done: ReleaseAfter,
// CancelAfter and PublishAfter. On the CUDA error of enqueuing that point, `state` is put
// back.
template <typename StatePointer, typename End>
[[nodiscard]] Status EndAfterStream(DeviceMemoryMapper& mapper, StatePointer& state, void* stream,
                                    int device_ordinal, End end) {
  struct EndTask final : StreamOrderedTask {
    EndTask(StatePointer ended, End ending) : state(std::move(ended)), end(std::move(ending)) {}
    void Run() override { end(std::move(state)); }
    StatePointer state;
    End end;
  };
  auto task = std::make_unique<EndTask>(std::move(state), std::move(end));
  EndTask* pending = task.get();
  std::unique_ptr<StreamOrderedTask> handed = std::move(task);
  if (Status after = StreamOrdered::ForProcess().After(mapper, stream, device_ordinal, handed);
      !after) {
    state = std::move(pending->state);
    return after;
  }
  return {};
}

}  // namespace hurray::client_internal
