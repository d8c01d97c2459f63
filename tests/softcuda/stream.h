// Streams and events of the software driver. A stream is an in-order queue of operations run
// by a worker thread of its own: a blocked operation (cuStreamWaitValue64) blocks that stream
// and nothing else, as on a GPU. An event is a marker in a stream, reached when the stream
// has run every operation queued before it.
//
// CUstream_st and CUevent_st are the types cuda.h declares but never defines: the driver's
// handles are pointers to them.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

// Thread-safe. Created with new; Destroy() returns at once and the stream deletes itself once
// its worker has run everything queued (cuStreamDestroy's documented behaviour).
struct CUstream_st {
 public:
  CUstream_st(CUcontext context, unsigned int flags);
  CUstream_st(const CUstream_st&) = delete;
  CUstream_st& operator=(const CUstream_st&) = delete;

  [[nodiscard]] CUcontext context() const { return context_; }
  [[nodiscard]] unsigned int flags() const { return flags_; }

  // Queues `operation`; the worker runs operations one at a time, in order.
  void Enqueue(std::function<void()> operation);
  // Returns once everything queued before the call has run.
  void Synchronize();
  // The caller gives the stream up: it must not touch it again.
  void Destroy();

 private:
  ~CUstream_st() = default;
  void Run();

  const CUcontext context_;
  const unsigned int flags_;
  std::mutex mutex_;
  std::condition_variable changed_;          // Guarded by mutex_: queue_, counts.
  std::deque<std::function<void()>> queue_;  // Guarded by mutex_.
  std::uint64_t enqueued_ = 0;               // Guarded by mutex_.
  std::uint64_t completed_ = 0;              // Guarded by mutex_.
  bool destroyed_ = false;                   // Guarded by mutex_.
  std::thread worker_;                       // Last: starts once the rest is built.
};

// How far the records of an event got. Shared by the event and the operations queued for it,
// so that an event destroyed while pending is harmless. Thread-safe.
struct EventProgress {
  std::atomic<std::uint64_t> recorded{0};  // Records made (cuEventRecord calls).
  std::atomic<std::uint64_t> reached{0};   // The latest record a stream has reached.
};

struct CUevent_st {
  CUcontext context = nullptr;
  unsigned int flags = 0;
  std::shared_ptr<EventProgress> progress = std::make_shared<EventProgress>();
};

namespace softcuda {

// Whether the cuStreamWaitValue64 condition `flags` holds for `word` against `value`:
// GEQ is the cyclic compare (int64_t)(word - value) >= 0, then EQ, AND, NOR. Pure.
bool WaitConditionHolds(std::uint64_t word, std::uint64_t value, unsigned int flags);

// Blocks the calling (stream worker) thread until the condition holds on `*address`, polling
// with a backoff from 10 microseconds to 1 millisecond.
void WaitForValue(const std::uint64_t* address, std::uint64_t value, unsigned int flags);

}  // namespace softcuda
