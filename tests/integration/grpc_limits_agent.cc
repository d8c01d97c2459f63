// hurray_grpc_limits_agent: the other uid of grpc_limits_test (run through setpriv). It holds
// what it opened until its stdin closes, then exits 0.
//
//   hurray_grpc_limits_agent connect SOCKET N
//     Opens N connections to the unix socket SOCKET and sends each the HTTP/2 client preface
//     and an empty SETTINGS frame, as a gRPC client would; waits (up to 60 s) until each is
//     either served (the daemon's SETTINGS arrived) or closed by the daemon, and prints
//     "served S closed C".
//   hurray_grpc_limits_agent watch SOCKET N
//     Opens N Watch streams (prefix "") on one gRPC channel to SOCKET, one after the other,
//     and prints one line per stream: "watching", or the status code's number and message of
//     a stream that ended at once.
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "hurray/v1/exchange.grpc.pb.h"

namespace {

// Blocks until stdin closes.
void HoldUntilStdinCloses() {
  char buffer[256];
  while (::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
}

int Connect(const std::string& path, int count) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  static constexpr char kEmptySettings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  std::string hello(kPreface, sizeof kPreface - 1);
  hello.append(kEmptySettings, sizeof kEmptySettings);
  enum class State : std::uint8_t { kWaiting, kServed, kClosed };
  std::vector<int> sockets;
  std::vector<State> states;
  for (int i = 0; i < count; ++i) {
    const int socket = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (socket < 0 ||
        ::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      std::perror("connect");
      return 1;
    }
    sockets.push_back(socket);
    states.push_back(::send(socket, hello.data(), hello.size(), MSG_NOSIGNAL) ==
                             static_cast<ssize_t>(hello.size())
                         ? State::kWaiting
                         : State::kClosed);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> waiting;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < sockets.size(); ++i) {
      if (states[i] != State::kWaiting) continue;
      waiting.push_back({.fd = sockets[i], .events = POLLIN, .revents = 0});
      index.push_back(i);
    }
    if (waiting.empty()) break;
    if (::poll(waiting.data(), waiting.size(), 100) < 0) return 1;
    for (std::size_t k = 0; k < waiting.size(); ++k) {
      if (waiting[k].revents == 0) continue;
      char buffer[4096];
      const ssize_t got = ::recv(waiting[k].fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got > 0) {
        states[index[k]] = State::kServed;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        states[index[k]] = State::kClosed;
      }
    }
  }
  int served = 0;
  int closed = 0;
  for (const State state : states) {
    served += state == State::kServed ? 1 : 0;
    closed += state == State::kClosed ? 1 : 0;
  }
  std::cout << "served " << served << " closed " << closed << '\n' << std::flush;
  HoldUntilStdinCloses();
  for (const int socket : sockets) ::close(socket);
  return 0;
}

int Watch(const std::string& path, int count) {
  auto channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
  auto stub = hurray::v1::Exchange::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<hurray::v1::WatchEvent>>> streams;
  for (int i = 0; i < count; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    hurray::v1::WatchRequest request;
    streams.push_back(stub->Watch(contexts.back().get(), request));
    hurray::v1::WatchEvent event;
    if (streams.back()->Read(&event)) {
      std::cout << "watching\n" << std::flush;
    } else {
      const grpc::Status status = streams.back()->Finish();
      std::cout << status.error_code() << " " << status.error_message() << '\n' << std::flush;
    }
  }
  HoldUntilStdinCloses();
  std::cout.flush();
  ::_exit(0);  // The streams' ends are the daemon's to notice; nothing here needs them.
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: hurray_grpc_limits_agent connect|watch SOCKET N\n";
    return 2;
  }
  const std::string mode = argv[1];
  const int count = std::stoi(argv[3]);
  if (mode == "connect") return Connect(argv[2], count);
  if (mode == "watch") return Watch(argv[2], count);
  std::cerr << "unknown mode " << mode << "\n";
  return 2;
}
