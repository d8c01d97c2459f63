#include "raw_session.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/unix_socket.h"

namespace hurray::integration {

std::optional<RawSession> RawSession::Connect(const std::string& session_socket_path) {
  auto socket = ConnectUnixSocket(session_socket_path);
  if (!socket) {
    ADD_FAILURE() << socket.error().ToString();
    return std::nullopt;
  }
  const timeval timeout{.tv_sec = 30, .tv_usec = 0};
  ::setsockopt(socket->get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return RawSession(std::move(*socket));
}

std::optional<RawSession> RawSession::Open(const std::string& session_socket_path) {
  auto session = Connect(session_socket_path);
  if (!session) return std::nullopt;
  v1::SessionMessage hello;
  hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
  hello.mutable_hello()->set_client_name("integration-raw");
  if (auto sent = session->Send(hello); !sent) {
    ADD_FAILURE() << "hello: " << sent.error().ToString();
    return std::nullopt;
  }
  auto welcome = session->Receive();
  if (!welcome || !welcome->has_welcome() || welcome->welcome().token().empty()) {
    ADD_FAILURE() << "no welcome on " << session_socket_path << ": "
                  << (welcome ? welcome->DebugString() : welcome.error().ToString());
    return std::nullopt;
  }
  session->token_ = welcome->welcome().token();
  return session;
}

Status RawSession::Send(const v1::SessionMessage& message) {
  const std::string bytes = message.SerializeAsString();
  return SendFrame(socket_.get(),
                   {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
}

Status RawSession::SendBytes(std::string_view bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t count =
        ::send(socket_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (count < 0) return ErrnoFailure("send", "", errno);
    sent += static_cast<std::size_t>(count);
  }
  return {};
}

Result<v1::SessionMessage> RawSession::Receive(UniqueFd* fd, std::string* payload) {
  auto frame = reader_.Next(socket_.get());
  if (!frame) return std::unexpected(frame.error());
  v1::SessionMessage message;
  if (!message.ParseFromArray(frame->payload.data(), static_cast<int>(frame->payload.size()))) {
    return InternalError("the daemon sent a frame that is no SessionMessage");
  }
  if (fd != nullptr) *fd = std::move(frame->fd);
  if (payload != nullptr) payload->assign(frame->payload.begin(), frame->payload.end());
  return message;
}

bool RawSession::ClosedByDaemon() {
  for (int frames = 0; frames < 16; ++frames) {
    auto frame = reader_.Next(socket_.get());
    if (!frame) return frame.error().code() == StatusCode::kUnavailable;
  }
  return false;
}

std::unique_ptr<grpc::ClientContext> RawContext(const std::optional<std::string>& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (token) context->AddMetadata(kSessionMetadataKey, *token);
  return context;
}

::testing::AssertionResult GrpcFails(const grpc::Status& status, grpc::StatusCode code,
                                     std::initializer_list<std::string_view> fragments) {
  const auto name = [](grpc::StatusCode c) {
    return std::string(StatusCodeName(static_cast<StatusCode>(c)));
  };
  if (status.ok()) return ::testing::AssertionFailure() << "expected " << name(code) << ", got OK";
  if (status.error_code() != code) {
    return ::testing::AssertionFailure()
           << "expected " << name(code) << ", got " << name(status.error_code()) << ": "
           << status.error_message();
  }
  for (std::string_view fragment : fragments) {
    if (status.error_message().find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << status.error_message() << "\" lacks \"" << fragment << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hurray::integration
