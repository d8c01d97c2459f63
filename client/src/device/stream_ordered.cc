#include "device/stream_ordered.h"

#include <utility>

namespace hurray::client_internal {
namespace {

// What a host function receives: the task, and where to hand it.
struct Handover {
  StreamOrdered* to = nullptr;
  std::unique_ptr<StreamOrderedTask> task;
};

}  // namespace

StreamOrdered::~StreamOrdered() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  if (thread_.joinable()) thread_.join();
}

StreamOrdered& StreamOrdered::ForProcess() {
  static auto* ordered = new StreamOrdered();  // NOLINT(cppcoreguidelines-owning-memory)
  return *ordered;
}

Status StreamOrdered::After(DeviceMemoryMapper& mapper, void* stream, int device_ordinal,
                            std::unique_ptr<StreamOrderedTask>& task) {
  auto handover = std::make_unique<Handover>(Handover{.to = this, .task = std::move(task)});
  if (Status launched =
          mapper.LaunchHostFunction(stream, device_ordinal, &HostFunction, handover.get());
      !launched) {
    task = std::move(handover->task);
    return launched;
  }
  (void)handover.release();  // The host function's now.
  return {};
}

void StreamOrdered::HostFunction(void* data) {
  std::unique_ptr<Handover> handover(static_cast<Handover*>(data));
  handover->to->Push(std::move(handover->task));
}

void StreamOrdered::Push(std::unique_ptr<StreamOrderedTask> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  ready_.notify_one();
}

std::size_t StreamOrdered::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + running_;
}

void StreamOrdered::Run() {
  std::unique_lock lock(mutex_);
  while (true) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, with nothing left.
    std::unique_ptr<StreamOrderedTask> task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task->Run();
    task.reset();  // What it held goes on this thread too, before the count says done.
    lock.lock();
    --running_;
  }
}

}  // namespace hurray::client_internal
