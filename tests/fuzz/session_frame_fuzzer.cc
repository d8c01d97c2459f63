// libFuzzer target for the session socket: the input's bytes reach a real SessionServer,
// serving a fresh Registry over a small CPU pool, through a real connection on a socket in
// a temporary directory. The first byte picks how:
//   - even: framed. A valid hello goes first; then each [length: 2 bytes, little-endian]
//     [length bytes] of the rest is sent as one frame (4-byte length, then the bytes, which
//     the server parses as a SessionMessage);
//   - odd: raw. The rest is written as it is, hello and framing included (lengths too
//     large, frames cut short).
// The fuzzer reads (and drops) every reply while it writes, then ends its side and reads
// until the server closes the connection.
//
// Promises checked: the server closes every connection whose client ended its side, and
// once it has (and Stop has returned), the session is gone and the registry and pool hold
// nothing after every name is deleted (RegistryFuzzHarness::CheckDrained).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"
#include "registry_fuzz_harness.h"
#include "session/registry_session_host.h"
#include "session/session_server.h"
#include "spdlog/spdlog.h"

namespace hurray::daemon {
namespace {

constexpr const char* kFuzzer = "session_frame_fuzzer";
constexpr int kPatienceMs = 5000;  // For the server to read or answer; never reached.

void AppendFrame(std::string_view payload, std::string& out) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>(length >> shift));
  out.append(payload);
}

// The bytes the fuzzer writes for `input` (see the file comment).
std::string WireBytes(std::span<const std::uint8_t> input) {
  std::string wire;
  if (input.empty()) return wire;
  const bool raw = (input[0] & 1) != 0;
  input = input.subspan(1);
  if (raw) return {input.begin(), input.end()};
  v1::SessionMessage hello;
  hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
  hello.mutable_hello()->set_client_name("fuzz");
  AppendFrame(hello.SerializeAsString(), wire);
  while (input.size() >= 2) {
    const std::size_t length = input[0] | (static_cast<std::size_t>(input[1]) << 8);
    input = input.subspan(2);
    const std::span<const std::uint8_t> payload = input.first(std::min(length, input.size()));
    AppendFrame(std::string(payload.begin(), payload.end()), wire);
    input = input.subspan(payload.size());
  }
  return wire;
}

// Writes `wire` to `socket` while reading every reply, then shuts its side and reads until
// the server closes. Replies may carry descriptors (SCM_RIGHTS): recv() without a control buffer
// drops them.
void Converse(int socket, const std::string& wire) {
  std::size_t written = 0;
  bool shut = false;
  std::vector<char> scratch(1 << 16);
  while (true) {
    if (!shut && written == wire.size()) {
      ::shutdown(socket, SHUT_WR);
      shut = true;
    }
    pollfd poll_fd{.fd = socket, .events = POLLIN, .revents = 0};
    if (!shut) poll_fd.events |= POLLOUT;
    const int ready = ::poll(&poll_fd, 1, kPatienceMs);
    if (ready == 0) BrokenInvariant(kFuzzer, "the server reads, answers or closes", wire);
    if (ready < 0) {
      if (errno == EINTR) continue;
      BrokenInvariant(kFuzzer, "poll works", std::to_string(errno));
    }
    if ((poll_fd.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t got = ::recv(socket, scratch.data(), scratch.size(), MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return;  // Closed.
    }
    if (!shut && (poll_fd.revents & POLLOUT) != 0) {
      const ssize_t sent =
          ::send(socket, wire.data() + written, wire.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && errno == EPIPE) {
        shut = true;  // The server closed first (a protocol error): read what is left.
      } else if (sent > 0) {
        written += static_cast<std::size_t>(sent);
      }
    }
  }
}

// The io_context that accepts, run by one thread until the process exits (so never
// destroyed), and the temporary directory of the socket.
struct Process {
  boost::asio::io_context io;
  std::string socket_path;
  std::thread io_thread;

  Process() {
    std::string directory = "/tmp/hurray-session-fuzz-XXXXXX";
    if (::mkdtemp(directory.data()) == nullptr) {
      BrokenInvariant(kFuzzer, "a temporary directory can be made", std::to_string(errno));
    }
    socket_path = directory + "/session.sock";
    io_thread = std::thread([this] {
      auto work = boost::asio::make_work_guard(io);
      io.run();
    });
    io_thread.detach();
  }
};

void RunOne(std::span<const std::uint8_t> input) {
  static Process& process = *new Process;  // Never destroyed: see Process.
  RegistryFuzzHarness harness(kFuzzer, process.io);
  RegistrySessionHost host(harness.registry());
  auto server = SessionServer::Create(process.io, process.socket_path, host, /*daemon_epoch=*/1);
  if (!server) BrokenInvariant(kFuzzer, "the server starts", server.error().ToString());
  {
    auto connection = ConnectUnixSocket(process.socket_path);
    if (!connection) BrokenInvariant(kFuzzer, "a client connects", connection.error().ToString());
    Converse(connection->get(), WireBytes(input));
  }
  (*server)->Stop();
  harness.CheckDrained();
}

}  // namespace
}  // namespace hurray::daemon

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // Protocol errors log; the fuzzer checks them.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hurray::daemon::RunOne(std::span(data, size));
  return 0;
}
