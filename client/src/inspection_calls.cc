#include "inspection_calls.h"

#include <atomic>
#include <memory>
#include <thread>
#include <utility>

namespace hurray::client_internal {
namespace {

// Reads a watch stream on its own thread until cancelled.
class WatchThread final : public WatchHandle {
 public:
  WatchThread(std::shared_ptr<Connection> connection, std::string prefix,
              std::function<void(const v1::WatchEvent&)> on_event,
              std::function<void(const Status&)> on_end)
      : connection_(std::move(connection)) {
    v1::WatchRequest request;
    request.set_prefix(std::move(prefix));
    // The session's uid decides what it sees. Without a session (the daemon is down), the
    // call goes out anonymous and fails as unavailable, which ends the watch.
    auto context = connection_->SessionContext("Watch");
    context_ = context ? std::move(*context) : std::make_unique<grpc::ClientContext>();
    reader_ = connection_->stub().Watch(context_.get(), request);
    thread_ = std::thread([this, on_event = std::move(on_event), on_end = std::move(on_end)] {
      v1::WatchEvent event;
      while (reader_->Read(&event)) {
        if (event.kind() == v1::WatchEvent::KIND_WATCHING) {
          confirmed_.store(1);
          confirmed_.notify_all();
          continue;
        }
        if (on_event) on_event(event);
      }
      grpc::Status status = reader_->Finish();
      confirmed_.store(2);
      confirmed_.notify_all();
      Status end;
      if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
        end = std::unexpected(FromGrpcStatus(status, "Watch"));
      }
      if (on_end) on_end(end);
    });
  }

  ~WatchThread() override {
    context_->TryCancel();
    thread_.join();
  }

  // True once the daemon confirmed the watch; false when the stream ended first.
  bool WaitConfirmed() {
    confirmed_.wait(0);
    return confirmed_.load() == 1;
  }

 private:
  std::shared_ptr<Connection> connection_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<v1::WatchEvent>> reader_;
  std::atomic<int> confirmed_{0};  // 0 waiting, 1 confirmed, 2 ended.
  std::thread thread_;
};

}  // namespace

Result<v1::ListResponse> CallList(Connection& connection, std::string_view prefix,
                                  std::uint32_t page_size, std::string_view page_token) {
  v1::ListRequest request;
  request.set_prefix(std::string(prefix));
  request.set_page_size(page_size);
  request.set_page_token(std::string(page_token));
  v1::ListResponse response;
  // With the session's token: the daemon shows this session what its uid may read.
  HURRAY_ASSIGN_OR_RETURN(const std::unique_ptr<grpc::ClientContext> context,
                          connection.SessionContext("List"));
  grpc::Status status = connection.stub().List(context.get(), request, &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, "List"));
  return response;
}

Result<v1::DescribeResponse> CallDescribe(Connection& connection, std::string_view name,
                                          std::uint64_t version) {
  v1::DescribeRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::DescribeResponse response;
  // With the session's token: the daemon shows this session what its uid may read.
  HURRAY_ASSIGN_OR_RETURN(const std::unique_ptr<grpc::ClientContext> context,
                          connection.SessionContext("Describe"));
  grpc::Status status = connection.stub().Describe(context.get(), request, &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, "Describe"));
  return response;
}

Result<v1::StatsResponse> CallStats(Connection& connection) {
  v1::StatsResponse response;
  // This client's own one-way releases show in the counts.
  connection.SyncUnansweredReleases();
  grpc::ClientContext context;
  grpc::Status status = connection.stub().Stats(&context, v1::StatsRequest(), &response);
  if (!status.ok()) return std::unexpected(FromGrpcStatus(status, "Stats"));
  return response;
}

Result<std::unique_ptr<WatchHandle>> StartWatch(std::shared_ptr<Connection> connection,
                                                std::string prefix,
                                                std::function<void(const v1::WatchEvent&)> on_event,
                                                std::function<void(const Status&)> on_end) {
  auto watch = std::make_unique<WatchThread>(std::move(connection), std::move(prefix),
                                             std::move(on_event), std::move(on_end));
  if (!watch->WaitConfirmed()) {
    return UnavailableError("Watch: the daemon ended the stream before confirming it");
  }
  return std::unique_ptr<WatchHandle>(std::move(watch));
}

}  // namespace hurray::client_internal
