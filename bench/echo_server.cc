#include "echo_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::bench {
namespace {

constexpr int kWarmUpRoundTrips = 100;

sockaddr_un SocketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) WorkerFail("socket path too long: " + path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Reads or writes exactly `size` bytes; false when the peer closed or on error.
bool ReadExactly(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t count = ::read(fd, data, size);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return false;
    data += count;
    size -= static_cast<std::size_t>(count);
  }
  return true;
}

bool WriteExactly(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t count = ::write(fd, data, size);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return false;
    data += count;
    size -= static_cast<std::size_t>(count);
  }
  return true;
}

void Echo(UniqueFd connection) {
  char message[kEchoMessageBytes];
  while (ReadExactly(connection.get(), message, sizeof(message)) &&
         WriteExactly(connection.get(), message, sizeof(message))) {
  }
}

}  // namespace

int EchoServerRole(const WorkerArgs& args) {
  const std::string& path = Arg(args, 0, "SOCKET");
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) WorkerFail(ErrnoError("socket", "", errno).message());
  const sockaddr_un address = SocketAddress(path);
  ::unlink(path.c_str());
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 64) != 0) {
    WorkerFail(ErrnoError("bind/listen", path, errno).message());
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) {
    const int connection = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      WorkerFail(ErrnoError("accept", "", errno).message());
    }
    std::thread(Echo, UniqueFd(connection)).detach();
  }
}

int SocketRoundTripRole(const WorkerArgs& args) {
  const std::string& path = Arg(args, 0, "SOCKET");
  const auto count = static_cast<int>(ArgNumber(args, 1, "COUNT"));
  UniqueFd connection(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_un address = SocketAddress(path);
  if (!connection || ::connect(connection.get(), reinterpret_cast<const sockaddr*>(&address),
                               sizeof(address)) != 0) {
    WorkerFail(ErrnoError("connect", path, errno).message());
  }
  char message[kEchoMessageBytes] = {};
  std::vector<std::int64_t> samples;
  samples.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < kWarmUpRoundTrips + count; ++i) {
    const std::int64_t start = NowNanoseconds();
    if (!WriteExactly(connection.get(), message, sizeof(message)) ||
        !ReadExactly(connection.get(), message, sizeof(message))) {
      WorkerFail("the echo server hung up");
    }
    if (i >= kWarmUpRoundTrips) samples.push_back(NowNanoseconds() - start);
  }
  EmitSamples("round_trip_ns", samples);
  return 0;
}

}  // namespace hurray::bench
