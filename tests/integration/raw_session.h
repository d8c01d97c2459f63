// Talking to hurrayd below the client library, for tests that must send what the library
// never would: a session opened by hand on the session socket, raw frames, and gRPC calls
// with doctored `x-hurray-session` metadata. Not thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "hurray/v1/session.pb.h"
#include "integration_test.h"

namespace hurray::integration {

// A connection to the session socket. Receives time out after 30 s (SO_RCVTIMEO) rather
// than hang a test. Closing it ends the session.
class RawSession {
 public:
  // Connects without saying hello. Records a test failure and returns nullopt on error.
  static std::optional<RawSession> Connect(const std::string& session_socket_path);
  // Connects, says hello (protocol version 1) and reads the welcome.
  static std::optional<RawSession> Open(const std::string& session_socket_path);

  [[nodiscard]] int fd() const { return socket_.get(); }
  [[nodiscard]] const std::string& token() const { return token_; }

  // Sends a message as one frame.
  [[nodiscard]] Status Send(const v1::SessionMessage& message);
  // Sends raw bytes, no framing added.
  [[nodiscard]] Status SendBytes(std::string_view bytes);
  // Reads one frame and parses it; the descriptor that came with it, if any, in *fd, and the
  // frame's payload as it came in *payload.
  [[nodiscard]] Result<v1::SessionMessage> Receive(UniqueFd* fd = nullptr,
                                                   std::string* payload = nullptr);
  // Reads frames until the daemon closes the connection: true once it has.
  [[nodiscard]] bool ClosedByDaemon();

 private:
  explicit RawSession(UniqueFd socket) : socket_(std::move(socket)) {}
  UniqueFd socket_;
  FrameReader reader_;  // Reads socket_'s frames.
  std::string token_;
};

// A context for a raw call: a 60 s deadline, and `token` as session metadata when given.
[[nodiscard]] std::unique_ptr<grpc::ClientContext> RawContext(
    const std::optional<std::string>& token);

// Whether a raw call failed with `code` and a message holding every fragment.
[[nodiscard]] ::testing::AssertionResult GrpcFails(
    const grpc::Status& status, grpc::StatusCode code,
    std::initializer_list<std::string_view> fragments = {});

// An integration test that also holds a raw gRPC stub on the daemon's socket, for calls the
// client library would never make.
class RawGrpcTest : public IntegrationTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(IntegrationTest::SetUp());
    channel_ = grpc::CreateChannel("unix:" + socket(), grpc::InsecureChannelCredentials());
    stub_ = v1::Exchange::NewStub(channel_);
  }
  void TearDown() override {
    // An open gRPC connection holds the daemon's shutdown for its whole grace period;
    // ShutdownTest covers that case.
    stub_.reset();
    channel_.reset();
    IntegrationTest::TearDown();
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Exchange::Stub> stub_;
};

}  // namespace hurray::integration
