// hurray_attack_agent: one attack of the security audit on a real hurrayd, as another uid,
// for the adversarial tests (tests/integration/adversarial_test.cc) and the benchmark's
// section 11 (bench/section_attacks.cc), which run it while a victim works.
//
//   hurray_attack_agent UID SOCKET ATTACK N
//
// Drops to UID (gid UID, no supplementary groups; run as root), then attacks the daemon
// whose gRPC socket is SOCKET (its session socket is SOCKET.session):
//   fd-trickle N      one session inside an unfinished frame sends N one-byte messages,
//                     each carrying a descriptor (SCM_RIGHTS of /dev/null);
//   stalled-frames N  N sessions each send all but the last byte of a 1 MiB frame;
//   dup-batch-wait N  a BatchAcquire waiting for "atk/x" listed N times and "atk/never",
//                     then 20 publishes of atk/x (each retried the whole batch before);
//   waits N           N Acquire calls waiting an hour for names never published;
//   pins N            N clients each hold 60 views on the fast path (a lease-page slot
//                     each) of names of their own, then publish each name again: 60 N
//                     superseded versions stay pinned;
//   grpc-connections N  N gRPC connections (channels of their own), each having made one
//                     call;
//   watchers N        N Watch streams of every name, never read.
// Prints "READY <what it saw>" once the attack is in place, then holds it (keeps every
// connection open) until its stdin closes or it is killed. Exits 2 for bad arguments, 3 when
// a step the attack needs fails (the line says which).
#include <fcntl.h>
#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hurray/client.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "hurray/v1/session.pb.h"

namespace {

using ::hurray::UniqueFd;

[[noreturn]] void Fail(const std::string& what) {
  std::printf("FAILED %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(3);
}

// A 64-byte tensor of the attacker's own, allocated through `client`.
::hurray::WritableTensor AllocateSmall(::hurray::Client& client) {
  auto descriptor = ::hurray::TensorDescriptor::Dense(::hurray::ElementType::kUint8, {64});
  if (!descriptor) Fail("descriptor: " + descriptor.error().ToString());
  auto tensor = client.Allocate(*descriptor);
  if (!tensor) Fail("allocate: " + tensor.error().ToString());
  return std::move(*tensor);
}

// A session socket connection that has said hello; its token in *token.
UniqueFd OpenSession(const std::string& session_socket, std::string* token = nullptr) {
  auto socket = ::hurray::ConnectUnixSocket(session_socket);
  if (!socket) Fail("connect: " + socket.error().ToString());
  hurray::v1::SessionMessage hello;
  hello.mutable_hello()->set_protocol_version(::hurray::kSessionProtocolVersion);
  hello.mutable_hello()->set_client_name("attacker");
  const std::string bytes = hello.SerializeAsString();
  if (auto sent = ::hurray::SendFrame(
          socket->get(), {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
      !sent) {
    Fail("hello: " + sent.error().ToString());
  }
  ::hurray::FrameReader reader;
  auto frame = reader.Next(socket->get());
  hurray::v1::SessionMessage welcome;
  if (!frame ||
      !welcome.ParseFromArray(frame->payload.data(), static_cast<int>(frame->payload.size())) ||
      !welcome.has_welcome()) {
    Fail("no welcome");
  }
  if (token != nullptr) *token = welcome.welcome().token();
  return std::move(*socket);
}

void SendAll(int socket, const std::vector<std::uint8_t>& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t count = ::send(socket, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (count < 0) Fail(std::string("send: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(count);
  }
}

// The little-endian length prefix of a frame of `length` bytes.
std::vector<std::uint8_t> Prefix(std::uint32_t length) {
  return {static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
          static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24)};
}

// Holds whatever the attack keeps open until stdin closes.
void Hold() {
  std::fflush(stdout);
  char byte = 0;
  while (::read(STDIN_FILENO, &byte, 1) > 0) {
  }
}

void FdTrickle(const std::string& session_socket, int count) {
  UniqueFd socket = OpenSession(session_socket);
  UniqueFd null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  SendAll(socket.get(), Prefix(::hurray::kMaxSessionFrameBytes));
  int sent = 0;
  for (; sent < count; ++sent) {
    char byte = 'x';
    iovec buffer{.iov_base = &byte, .iov_len = 1};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    msghdr message{};
    message.msg_iov = &buffer;
    message.msg_iovlen = 1;
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    const int fd = null_device.get();
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
    if (::sendmsg(socket.get(), &message, MSG_NOSIGNAL) != 1) break;  // Closed by the daemon.
  }
  std::printf("READY sent %d descriptors\n", sent);
  Hold();
}

void StalledFrames(const std::string& session_socket, int count) {
  std::vector<UniqueFd> sockets;
  std::vector<std::uint8_t> almost = Prefix(::hurray::kMaxSessionFrameBytes);
  almost.resize(almost.size() + ::hurray::kMaxSessionFrameBytes - 1, 0x0A);
  int opened = 0;
  for (; opened < count; ++opened) {
    UniqueFd session = OpenSession(session_socket);
    SendAll(session.get(), almost);
    sockets.push_back(std::move(session));
  }
  std::printf("READY %d connections each 1 byte short of a 1 MiB frame\n", opened);
  Hold();
}

hurray::v1::Exchange::Stub& Stub(const std::string& socket) {
  static auto stub = hurray::v1::Exchange::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  return *stub;
}

void DupBatchWait(const std::string& socket, int count) {
  std::string token;
  UniqueFd session = OpenSession(socket + ".session", &token);
  hurray::v1::BatchAcquireRequest request;
  for (int i = 0; i < count; ++i) request.add_names("atk/x");
  request.add_names("atk/never");
  request.set_wait_timeout_ms(600'000);
  grpc::ClientContext context;
  context.AddMetadata("x-hurray-session", token);
  hurray::v1::BatchAcquireResponse response;
  grpc::CompletionQueue queue;
  auto call = Stub(socket).AsyncBatchAcquire(&context, request, &queue);
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // The wait is in place.
  auto client = ::hurray::Client::Connect({.socket_path = socket, .client_name = "attacker"});
  if (!client) Fail("client: " + client.error().ToString());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    ::hurray::WritableTensor tensor = AllocateSmall(**client);
    if (auto published = tensor.Publish("atk/x"); !published) {
      Fail("publish: " + published.error().ToString());
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  std::printf("READY 20 publishes of a name a batch lists %d times took %lld ms\n", count,
              static_cast<long long>(took.count()));
  Hold();
  context.TryCancel();
  void* tag = nullptr;
  bool ok = false;
  (void)queue.Next(&tag, &ok);
}

void Waits(const std::string& socket, int count) {
  std::string token;
  UniqueFd session = OpenSession(socket + ".session", &token);
  grpc::CompletionQueue queue;
  struct Call {
    grpc::ClientContext context;
    hurray::v1::AcquireResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<hurray::v1::AcquireResponse>> reader;
  };
  std::vector<std::unique_ptr<Call>> calls;
  calls.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto call = std::make_unique<Call>();
    call->context.AddMetadata("x-hurray-session", token);
    hurray::v1::AcquireRequest request;
    request.set_name("atk/never-" + std::to_string(i));
    request.set_wait_timeout_ms(3'600'000);
    call->reader = Stub(socket).AsyncAcquire(&call->context, request, &queue);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  // The refused ones answer at once, the waiting ones not for an hour: count answers until
  // none has come for 3 s.
  int refused = 0;
  void* tag = nullptr;
  bool ok = false;
  while (queue.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(3)) ==
         grpc::CompletionQueue::GOT_EVENT) {
    const auto* call = static_cast<Call*>(tag);
    if (call->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++refused;
  }
  std::printf("READY %d waits asked, %d refused\n", count, refused);
  Hold();
  for (auto& call : calls) call->context.TryCancel();
}

void Pins(const std::string& socket, int clients) {
  constexpr int kViews = 60;  // Within the default lease page of 64 slots.
  std::vector<std::unique_ptr<::hurray::Client>> held_clients;
  std::vector<::hurray::TensorView> views;
  int pinned = 0;
  for (int c = 0; c < clients; ++c) {
    auto client = ::hurray::Client::Connect(
        {.socket_path = socket, .client_name = "attacker-" + std::to_string(c)});
    if (!client) Fail("client: " + client.error().ToString());
    const auto publish = [&](const std::string& name) {
      ::hurray::WritableTensor tensor = AllocateSmall(**client);
      if (auto published = tensor.Publish(name); !published) {
        Fail("publish: " + published.error().ToString());
      }
    };
    for (int i = 0; i < kViews; ++i) {
      const std::string name = "atk/pin-" + std::to_string(c) + "-" + std::to_string(i);
      publish(name);
      if (!(*client)->Acquire(name)) Fail("acquire " + name);  // Granted, and cached.
      auto view = (*client)->Acquire(name);                    // On the fast path: a slot names it.
      if (!view) Fail("acquire again " + name);
      views.push_back(std::move(*view));
    }
    for (int i = 0; i < kViews; ++i) {
      publish("atk/pin-" + std::to_string(c) + "-" + std::to_string(i));
      ++pinned;
    }
    held_clients.push_back(std::move(*client));
  }
  std::printf("READY %d clients hold %d superseded versions\n", clients, pinned);
  Hold();
}

void GrpcConnections(const std::string& socket, int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  int answered = 0;
  int refused = 0;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetInt("hurray.attack.channel", i);  // A connection of its own.
    channels.push_back(
        grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), arguments));
    auto stub = hurray::v1::Exchange::NewStub(channels.back());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    hurray::v1::StatsResponse response;
    if (stub->Stats(&context, hurray::v1::StatsRequest(), &response).ok()) {
      ++answered;
    } else {
      ++refused;
    }
  }
  std::printf("READY %d connections: %d answered, %d refused\n", count, answered, refused);
  Hold();
}

void Watchers(const std::string& socket, int count) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = hurray::v1::Exchange::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<hurray::v1::WatchEvent>>> streams;
  int watching = 0;
  for (int i = 0; i < count; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->Watch(contexts.back().get(), hurray::v1::WatchRequest()));
    hurray::v1::WatchEvent first;
    if (streams.back()->Read(&first) && first.kind() == hurray::v1::WatchEvent::KIND_WATCHING) {
      ++watching;
    }
  }
  std::printf("READY %d watch streams of every name, never read (%d established)\n", count,
              watching);
  Hold();
  for (auto& context : contexts) context->TryCancel();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: hurray_attack_agent UID SOCKET ATTACK N\n");
    return 2;
  }
  const auto uid = static_cast<uid_t>(std::stoul(argv[1]));
  const std::string socket = argv[2];
  const std::string attack = argv[3];
  const int count = std::stoi(argv[4]);
  if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) {
    Fail("drop to uid " + std::to_string(uid));
  }
  if (attack == "fd-trickle") {
    FdTrickle(socket + ".session", count);
  } else if (attack == "stalled-frames") {
    StalledFrames(socket + ".session", count);
  } else if (attack == "dup-batch-wait") {
    DupBatchWait(socket, count);
  } else if (attack == "waits") {
    Waits(socket, count);
  } else if (attack == "pins") {
    Pins(socket, count);
  } else if (attack == "grpc-connections") {
    GrpcConnections(socket, count);
  } else if (attack == "watchers") {
    Watchers(socket, count);
  } else {
    std::fprintf(stderr, "unknown attack %s\n", attack.c_str());
    return 2;
  }
  return 0;
}
