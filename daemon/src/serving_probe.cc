#include "serving_probe.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "registry/registry.h"

namespace hurray::daemon {

EventLoopRegistryProbe::EventLoopRegistryProbe(boost::asio::io_context& io,
                                               const Registry& registry)
    : io_(io), registry_(registry) {}

Status EventLoopRegistryProbe::Probe(std::chrono::steady_clock::time_point deadline) {
  if (!round_) {
    round_ = std::make_shared<Round>();
    round_->posted = std::chrono::steady_clock::now();
    answered_ = round_->answered.get_future();
    boost::asio::post(io_, [round = round_, &registry = registry_] {
      round->started.store(true, std::memory_order_release);
      static_cast<void>(registry.Stats());
      round->answered.set_value();
    });
  }
  if (answered_.wait_until(deadline) == std::future_status::ready) {
    round_.reset();
    return {};
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - round_->posted)
                          .count();
  if (!round_->started.load(std::memory_order_acquire)) {
    return DeadlineExceededError(fmt::format(
        "the event loop (session socket, io_threads) has not run a task posted {} ms ago", waited));
  }
  return DeadlineExceededError(
      fmt::format("the registry has not answered Stats for {} ms (its mutex is held)", waited));
}

}  // namespace hurray::daemon
