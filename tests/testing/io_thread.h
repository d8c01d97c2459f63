// IoThread: runs a test's io_context on a thread of its own, as the daemon's io threads do,
// and stops it before what its handlers reach is destroyed.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

namespace hurray::testing {

// A Registry's timer and process-exit handlers capture the registry: cancelling them in its
// destructor cannot stop one that has already begun (it waits on the registry's mutex). So,
// as in the daemon, the io_context stops before the registry goes: Stop(), then reset it.
// A handler still queued then runs on the next IoThread of that io_context: replace a
// registry that armed a timer with a fresh io_context too.
class IoThread {
 public:
  explicit IoThread(boost::asio::io_context& io) : io_(io) {
    io_.restart();  // After another IoThread's Stop(); before Stop() can be called.
    thread_ = std::thread([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  ~IoThread() { Stop(); }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Returns once no handler of io_ runs, nor ever will on this thread.
  void Stop() {
    if (!thread_.joinable()) return;
    io_.stop();
    thread_.join();
  }

 private:
  boost::asio::io_context& io_;
  std::thread thread_;
};

}  // namespace hurray::testing
