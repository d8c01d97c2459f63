// The Redis baseline: a real redis-server (Debian's), started by the harness on a unix
// socket in its temporary directory with persistence off, holding the tensor as
// kRedisValueBytes-sized string values ("bench:tensor:0", ...; Redis caps one value at
// 512 MiB by default), and a consumer that GETs them with hiredis.
//
// Worker role (worker.h):
//   redis-get SOCKET BYTES R    R times: GET every value of a BYTES tensor and read every
//                               byte (checked against the pattern); prints "first_ns" (the
//                               first time in this process) and "repeat_ns" (each later one).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "testing/child_process.h"
#include "worker.h"

namespace hurray::bench {

// Bytes per Redis value: 256 MiB, well inside Redis' 512 MiB limit.
inline constexpr std::uint64_t kRedisValueBytes = std::uint64_t{256} << 20;

// redis-server as a child process. Not thread-safe.
class RedisServer {
 public:
  // Starts redis-server (found on PATH, or /usr/bin) on DIRECTORY/redis.sock, and waits
  // (up to 30 s) until it answers PING. UNAVAILABLE with its log otherwise.
  [[nodiscard]] static Result<std::unique_ptr<RedisServer>> Start(const std::string& directory,
                                                                  const std::vector<int>& cpus);

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }
  [[nodiscard]] pid_t pid() const { return process_.pid(); }

  // Stores a tensor of `bytes` bytes of the pattern (memory_touch.h) as its values.
  [[nodiscard]] Status StoreTensor(std::uint64_t bytes) const;

 private:
  RedisServer(std::string socket_path, testing::ChildProcess process)
      : socket_path_(std::move(socket_path)), process_(std::move(process)) {}

  std::string socket_path_;
  testing::ChildProcess process_;  // Killed with the server.
};

[[nodiscard]] int RedisGetRole(const WorkerArgs& args);

}  // namespace hurray::bench
