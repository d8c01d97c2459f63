#include "stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

CUstream_st::CUstream_st(CUcontext context, unsigned int flags)
    : context_(context), flags_(flags), worker_([this] { Run(); }) {}

void CUstream_st::Enqueue(std::function<void()> operation) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(operation));
    ++enqueued_;
  }
  changed_.notify_all();
}

void CUstream_st::Synchronize() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return completed_ >= target; });
}

void CUstream_st::Destroy() {
  {
    std::lock_guard lock(mutex_);
    destroyed_ = true;
  }
  changed_.notify_all();
}

void CUstream_st::Run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !queue_.empty() || destroyed_; });
    if (queue_.empty()) break;  // Destroyed, and everything queued has run.
    std::function<void()> operation = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    operation();
    lock.lock();
    ++completed_;
    changed_.notify_all();
  }
  lock.unlock();
  // Nobody holds the stream any more (Destroy's contract): it frees itself.
  worker_.detach();
  delete this;
}

namespace softcuda {

bool WaitConditionHolds(std::uint64_t word, std::uint64_t value, unsigned int flags) {
  switch (flags & ~static_cast<unsigned int>(CU_STREAM_WAIT_VALUE_FLUSH)) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      // cuda.h: "(int64_t)(*addr - value) >= 0", a cyclic compare.
      return static_cast<std::int64_t>(word - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return word == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (word & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR:
      return ~(word | value) != 0;
    default:
      return false;
  }
}

void WaitForValue(const std::uint64_t* address, std::uint64_t value, unsigned int flags) {
  auto pause = std::chrono::microseconds(10);
  // The word is written by other threads and processes: an atomic load of plain memory.
  while (!WaitConditionHolds(__atomic_load_n(address, __ATOMIC_ACQUIRE), value, flags)) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace softcuda
