#include "redis_baseline.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "memory_touch.h"

namespace hurray::bench {
namespace {

using ::hurray::testing::ChildProcess;

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using RedisContext = std::unique_ptr<redisContext, ContextDeleter>;
using RedisReply = std::unique_ptr<redisReply, ReplyDeleter>;

Result<RedisContext> Connect(const std::string& socket) {
  RedisContext context(redisConnectUnix(socket.c_str()));
  if (!context) return UnavailableError("redisConnectUnix " + socket + ": out of memory");
  if (context->err != 0) {
    return UnavailableError("redisConnectUnix " + socket + ": " + context->errstr);
  }
  return context;
}

// Runs a command; an error reply or a broken connection is UNAVAILABLE naming `what`.
template <typename... Args>
Result<RedisReply> Command(redisContext& context, const std::string& what, const char* format,
                           Args... args) {
  RedisReply reply(static_cast<redisReply*>(redisCommand(&context, format, args...)));
  if (!reply) return UnavailableError("redis " + what + ": " + context.errstr);
  if (reply->type == REDIS_REPLY_ERROR) {
    return UnavailableError("redis " + what + ": " + std::string(reply->str, reply->len));
  }
  return reply;
}

std::string Key(std::uint64_t index) { return "bench:tensor:" + std::to_string(index); }

std::string FindRedisServer() {
  for (const char* candidate : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "redis-server";
}

}  // namespace

Result<std::unique_ptr<RedisServer>> RedisServer::Start(const std::string& directory,
                                                        const std::vector<int>& cpus) {
  const std::string socket = directory + "/redis.sock";
  const std::string log = directory + "/redis.log";
  auto process = ChildProcess::Start(
      {FindRedisServer(), "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
       "--save", "", "--appendonly", "no", "--dir", directory, "--logfile", log, "--daemonize",
       "no", "--protected-mode", "no"},
      ChildProcess::Options{.stdout_path = log, .stderr_path = log, .cpus = cpus});
  if (!process) return std::unexpected(process.error());
  std::unique_ptr<RedisServer> server(new RedisServer(socket, std::move(*process)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!server->process_.Running()) break;
    auto context = Connect(socket);
    if (!context) {
      last_error = context.error().ToString();
    } else if (auto pong = Command(**context, "PING", "PING"); !pong) {
      last_error = pong.error().ToString();
    } else {
      return server;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream log_file(log);
  std::ostringstream text;
  text << log_file.rdbuf();
  return UnavailableError("redis-server did not answer PING (" + last_error + "); log:\n" +
                          text.str());
}

Status RedisServer::StoreTensor(std::uint64_t bytes) const {
  auto context = Connect(socket_path_);
  if (!context) return std::unexpected(context.error());
  std::vector<std::byte> value(std::min(bytes, kRedisValueBytes));
  for (std::uint64_t offset = 0, index = 0; offset < bytes; offset += value.size(), ++index) {
    const std::uint64_t size = std::min<std::uint64_t>(value.size(), bytes - offset);
    FillPattern(std::span(value.data(), size), offset / 8);
    const std::string key = Key(index);
    auto stored = Command(**context, "SET " + key, "SET %b %b", key.data(), key.size(),
                          value.data(), static_cast<std::size_t>(size));
    if (!stored) return std::unexpected(stored.error());
  }
  return {};
}

int RedisGetRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::uint64_t bytes = ArgNumber(args, 1, "BYTES");
  const auto repetitions = static_cast<int>(ArgNumber(args, 2, "R"));
  RedisContext context = CheckOk(Connect(socket), "connect");
  (void)CheckOk(Command(*context, "PING", "PING"), "PING");  // Untimed, like ConnectWarm.
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    const std::int64_t start = NowNanoseconds();
    std::uint64_t checksum = 0;
    for (std::uint64_t offset = 0, index = 0; offset < bytes; offset += kRedisValueBytes, ++index) {
      const std::string key = Key(index);
      RedisReply reply =
          CheckOk(Command(*context, "GET " + key, "GET %b", key.data(), key.size()), "GET");
      const std::uint64_t expected = std::min(kRedisValueBytes, bytes - offset);
      if (reply->type != REDIS_REPLY_STRING || reply->len != expected) {
        WorkerFail("GET " + key + ": not a string of " + std::to_string(expected) + " bytes");
      }
      checksum += ReadEveryByte(std::as_bytes(std::span(reply->str, reply->len)));
    }
    const std::int64_t elapsed = NowNanoseconds() - start;
    if (checksum != PatternChecksum(bytes)) WorkerFail("GET: the bytes differ");
    EmitValue(repetition == 0 ? "first_ns" : "repeat_ns", static_cast<double>(elapsed));
  }
  return 0;
}

}  // namespace hurray::bench
