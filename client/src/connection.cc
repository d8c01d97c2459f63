#include "connection.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "hurray/socket_path.h"

namespace hurray::client_internal {
namespace {

constexpr char kSessionMetadataKey[] = "x-hurray-session";

}  // namespace

Mapping::~Mapping() { ::munmap(base_, size_); }

Error FromGrpcStatus(const grpc::Status& status, std::string_view call) {
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message = std::string(call) + ": daemon unavailable: " + message;
  }
  return Error(static_cast<StatusCode>(status.error_code()), std::move(message));
}

Connection::Connection(std::string socket_path, std::unique_ptr<client::SessionConnection> session,
                       std::shared_ptr<grpc::Channel> channel)
    : socket_path_(std::move(socket_path)),
      session_(std::move(session)),
      channel_(std::move(channel)),
      stub_(v1::Exchange::NewStub(channel_)) {}

Result<std::shared_ptr<Connection>> Connection::Open(std::string socket_path,
                                                     std::string_view client_name) {
  if (socket_path.empty()) socket_path = DefaultClientSocketPath();
  auto session = client::SessionConnection::Connect(SessionSocketPath(socket_path), client_name);
  if (!session) return std::unexpected(session.error());
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel("unix:" + socket_path,
                                           grpc::InsecureChannelCredentials(), arguments);
  return std::shared_ptr<Connection>(
      new Connection(std::move(socket_path), std::move(*session), std::move(channel)));
}

std::unique_ptr<grpc::ClientContext> Connection::SessionContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata(kSessionMetadataKey, session_->token());
  return context;
}

Result<std::shared_ptr<Mapping>> Connection::MapSegment(std::uint64_t segment_id,
                                                        bool writable) {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(segment_id, writable);
  if (auto found = mappings_.find(key); found != mappings_.end()) return found->second;
  auto granted = session_->MapSegment(segment_id, writable);
  if (!granted) return std::unexpected(granted.error());
  const int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* base = ::mmap(nullptr, granted->size, protection, MAP_SHARED, granted->fd.get(), 0);
  if (base == MAP_FAILED) {
    return InternalError("mmap segment " + std::to_string(segment_id) + ": " +
                         std::strerror(errno));
  }
  auto mapping = std::make_shared<Mapping>(base, granted->size, writable);
  mappings_.emplace(key, mapping);
  return mapping;
}

}  // namespace hurray::client_internal
