#include "grpc_listener.h"

#include <fmt/format.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "descriptor_reserve.h"
#include "grpc_connection_ledger.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/ipc/unix_socket.h"
#include "metrics/metrics_address.h"

namespace hurray::daemon {
namespace {

using boost::asio::ip::tcp;
using boost::asio::local::stream_protocol;

// How long accepting pauses when the daemon is out of descriptors or memory.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// Most connections accepted per wake-up, so that one socket's flood does not starve the
// other's handlers on the same thread.
constexpr int kMaxAcceptsPerWakeup = 64;

// Whether descriptor `connection.fd` is still the socket the ledger recorded.
bool StillOpen(const GrpcConnectionLedger::Connection& connection) {
  struct stat info{};
  return ::fstat(connection.fd, &info) == 0 && S_ISSOCK(info.st_mode) &&
         static_cast<std::uint64_t>(info.st_ino) == connection.inode;
}

}  // namespace

class GrpcListener::Core : public std::enable_shared_from_this<Core> {
 public:
  Core(boost::asio::io_context& io_context, const Options& options)
      : options_(options),
        unix_acceptor_(io_context),
        tcp_acceptor_(io_context),
        unix_retry_(io_context),
        tcp_retry_(io_context),
        ledger_(PeerCounts::Limits{.max_total = options.max_connections,
                                   .max_per_peer = options.max_connections_per_uid,
                                   .total_setting = "max_grpc_connections",
                                   .per_peer_setting = "max_grpc_connections_per_uid",
                                   .what = "gRPC connections"},
                StillOpen) {}

  // Binds the TCP address first: a failure there leaves no unix socket file behind.
  Status Listen() {
    if (!options_.tcp_address.empty()) HURRAY_RETURN_IF_ERROR(ListenTcp());
    return ListenUnix();
  }

  void Serve(grpc::Server& server) {
    std::lock_guard lock(mutex_);
    if (stopped_ || server_ != nullptr) return;
    server_ = &server;
    Arm(kUnix);
    if (tcp_acceptor_.is_open()) Arm(kTcp);
  }

  void Stop() {
    std::unique_lock lock(mutex_);
    stopped_ = true;
    boost::system::error_code ignored;
    (void)unix_acceptor_.close(ignored);
    (void)tcp_acceptor_.close(ignored);
    RemoveSocketFile();
    unix_retry_.cancel();
    tcp_retry_.cancel();
    handlers_done_.wait(lock, [this] { return running_handlers_ == 0; });
  }

  std::optional<PeerKey> PeerOf(std::string_view grpc_peer) const {
    constexpr std::string_view kPrefix = "fd:";
    if (!grpc_peer.starts_with(kPrefix)) return std::nullopt;
    const std::string_view number = grpc_peer.substr(kPrefix.size());
    int fd = -1;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), fd);
    if (error != std::errc() || end != number.data() + number.size()) return std::nullopt;
    std::lock_guard lock(mutex_);
    return ledger_.PeerOf(fd);
  }

  std::size_t connection_count() {
    std::lock_guard lock(mutex_);
    ledger_.Sweep();
    return ledger_.count();
  }

  [[nodiscard]] std::uint64_t refused_count() const {
    return refused_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint16_t tcp_port() const { return tcp_port_; }

 private:
  enum Kind : std::uint8_t { kUnix, kTcp };

  Status ListenUnix() {
    boost::system::error_code error;
    const auto failed = [&](std::string_view step) {
      return FailedPreconditionError(fmt::format("cannot listen on unix:{}: {}: {}",
                                                 options_.socket_path, step, error.message()));
    };
    if (unix_acceptor_.open(stream_protocol(), error); error) return failed("socket");
    // The file is made with its mode before the socket listens: nobody it leaves out can
    // connect, not even briefly.
    Result<BoundSocketFile> bound = BoundSocketFile::Bind(
        unix_acceptor_.native_handle(), options_.socket_path, options_.socket_mode);
    if (!bound) {
      return FailedPreconditionError(fmt::format("cannot listen on unix:{}: {}",
                                                 options_.socket_path, bound.error().message()));
    }
    socket_file_ = std::move(*bound);
    if (unix_acceptor_.listen(SOMAXCONN, error); error) {
      socket_file_.reset();  // Removes the file this bind made.
      return failed("listen");
    }
    if (unix_acceptor_.non_blocking(true, error); error) {
      socket_file_.reset();
      return failed("O_NONBLOCK");
    }
    return {};
  }

  Status ListenTcp() {
    HURRAY_ASSIGN_OR_RETURN(const MetricsAddress address,
                            ParseTcpAddress(options_.tcp_address, "tcp_address"));
    boost::system::error_code error;
    const auto failed = [&](std::string_view step) {
      return FailedPreconditionError(
          fmt::format("cannot listen on {}: {}: {}", options_.tcp_address, step, error.message()));
    };
    std::string host = address.host;
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    const boost::asio::ip::address ip = boost::asio::ip::make_address(host, error);
    if (error) return failed("address");
    const tcp::endpoint endpoint(ip, address.port);
    if (tcp_acceptor_.open(endpoint.protocol(), error); error) return failed("socket");
    if (tcp_acceptor_.set_option(tcp::acceptor::reuse_address(true), error); error) {
      return failed("SO_REUSEADDR");
    }
    if (tcp_acceptor_.bind(endpoint, error); error) return failed("bind");
    if (tcp_acceptor_.listen(SOMAXCONN, error); error) return failed("listen");
    if (tcp_acceptor_.non_blocking(true, error); error) return failed("O_NONBLOCK");
    tcp_port_ = tcp_acceptor_.local_endpoint(error).port();
    return {};
  }

  int ListenerFd(Kind kind) {
    return kind == kUnix ? unix_acceptor_.native_handle() : tcp_acceptor_.native_handle();
  }

  // Waits for `kind`'s listener to have connections queued. Called with mutex_ held.
  void Arm(Kind kind) {
    auto handler = [self = shared_from_this(), kind](const boost::system::error_code& error) {
      self->OnReady(kind, error);
    };
    if (kind == kUnix) {
      unix_acceptor_.async_wait(stream_protocol::acceptor::wait_read, std::move(handler));
    } else {
      tcp_acceptor_.async_wait(tcp::acceptor::wait_read, std::move(handler));
    }
  }

  // Arms `kind` again after kAcceptRetryDelay. Called with mutex_ held.
  void ArmRetry(Kind kind) {
    boost::asio::steady_timer& timer = kind == kUnix ? unix_retry_ : tcp_retry_;
    timer.expires_after(kAcceptRetryDelay);
    timer.async_wait([self = shared_from_this(), kind](const boost::system::error_code& error) {
      if (error) return;
      std::lock_guard lock(self->mutex_);
      if (!self->stopped_) self->Arm(kind);
    });
  }

  void OnReady(Kind kind, const boost::system::error_code& error) {
    if (error == boost::asio::error::operation_aborted) return;
    std::vector<UniqueFd> accepted;
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      ++running_handlers_;
      bool keep_accepting = false;
      if (error) {
        spdlog::warn("gRPC on {}: waiting for connections failed: {}", Where(kind),
                     error.message());
      } else {
        keep_accepting = AcceptQueued(kind, accepted);
      }
      if (keep_accepting) {
        Arm(kind);
      } else {
        ArmRetry(kind);
      }
    }
    for (UniqueFd& socket : accepted) Admit(kind, std::move(socket));
    std::lock_guard lock(mutex_);
    if (--running_handlers_ == 0) handlers_done_.notify_all();
  }

  // Accepts what is queued; false when accepting must pause. Called with mutex_ held.
  bool AcceptQueued(Kind kind, std::vector<UniqueFd>& accepted) {
    for (int i = 0; i < kMaxAcceptsPerWakeup; ++i) {
      // Non-blocking, as gRPC's endpoints need.
      const int socket =
          ::accept4(ListenerFd(kind), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (socket >= 0) {
        if (accept_exhausted_) {
          accept_exhausted_ = false;
          spdlog::info("gRPC on {}: accepting connections again", Where(kind));
        }
        UniqueFd connection(socket);
        // At once, not with the batch: a batch of refused descriptors must not fill the
        // reserve they are refused for.
        if (std::optional<Error> refusal =
                DescriptorReserveRefusal(connection.get(), options_.reserved_descriptors)) {
          Refuse(kind, connection.get(), *refusal);
          continue;  // `connection` closes.
        }
        accepted.push_back(std::move(connection));
        continue;
      }
      const int failure = errno;
      if (failure == EINTR || failure == ECONNABORTED) continue;
      if (failure == EAGAIN || failure == EWOULDBLOCK) return true;
      if (!IsAcceptExhaustion(failure)) {
        spdlog::warn("gRPC on {}: {}", Where(kind), ErrnoError("accept4", "", failure).ToString());
      } else if (!accept_exhausted_) {
        accept_exhausted_ = true;
        spdlog::warn(
            "gRPC on {}: {}; new connections wait, retried every {} ms (logged once until "
            "accepting works again)",
            Where(kind), ErrnoError("accept4", "", failure).ToString(), kAcceptRetryDelay.count());
      }
      return false;
    }
    return true;
  }

  // Hands `socket` to the gRPC server, or refuses it.
  void Admit(Kind kind, UniqueFd socket) {
    GrpcConnectionLedger::Connection connection{.fd = socket.get(), .inode = 0, .peer = {}};
    pid_t pid = 0;
    if (kind == kUnix) {
      auto credentials = ReadPeerCredentials(socket.get());
      if (!credentials) {
        spdlog::warn("gRPC on {}: dropped a connection: {}", Where(kind),
                     credentials.error().ToString());
        return;
      }
      connection.peer = credentials->uid;
      pid = credentials->pid;
    } else {
      const int on = 1;
      (void)::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    }
    struct stat info{};
    if (::fstat(socket.get(), &info) != 0) return;  // Cannot fail on a descriptor we hold.
    connection.inode = static_cast<std::uint64_t>(info.st_ino);
    std::optional<Error> refusal;
    grpc::Server* server = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      refusal = ledger_.Admit(connection, std::chrono::steady_clock::now());
      server = server_;
    }
    if (refusal) {
      Refuse(kind, connection.peer, pid, *refusal);
      return;  // `socket` closes: the client sees the connection end before any HTTP/2.
    }
    // Outside mutex_: the server may start serving (and even close) it at once.
    grpc::AddInsecureChannelFromFd(server, socket.Release());
  }

  // Refuse, for a connection whose peer is not read yet.
  void Refuse(Kind kind, int socket, const Error& refusal) {
    PeerKey peer;
    pid_t pid = 0;
    if (kind == kUnix) {
      if (auto credentials = ReadPeerCredentials(socket)) {
        peer = credentials->uid;
        pid = credentials->pid;
      }
    }
    Refuse(kind, peer, pid, refusal);
  }

  void Refuse(Kind kind, PeerKey peer, pid_t pid, const Error& refusal) {
    const std::uint64_t refused = refused_.fetch_add(1, std::memory_order_relaxed) + 1;
    // At the 1st, 2nd, 4th, 8th... refusal: a flood of them logs a few lines, not one each.
    if (std::has_single_bit(refused)) {
      spdlog::warn("gRPC on {}: refused a connection of {}{}: {} ({} refused so far)", Where(kind),
                   DescribePeer(peer), kind == kUnix ? fmt::format(" (pid {})", pid) : "",
                   refusal.message(), refused);
    }
  }

  // Removes the unix socket's file unless another file has taken its path. Called with
  // mutex_ held.
  void RemoveSocketFile() {
    if (!socket_file_) return;
    if (const Status removed = socket_file_->Remove(); !removed) {
      spdlog::warn("gRPC: {}", removed.error().ToString());
    }
  }

  [[nodiscard]] std::string Where(Kind kind) const {
    return kind == kUnix ? fmt::format("unix:{}", options_.socket_path) : options_.tcp_address;
  }

  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable handlers_done_;
  stream_protocol::acceptor unix_acceptor_;  // Guarded by mutex_ once Serve ran.
  tcp::acceptor tcp_acceptor_;               // Guarded by mutex_ once Serve ran.
  boost::asio::steady_timer unix_retry_;     // Guarded by mutex_.
  boost::asio::steady_timer tcp_retry_;      // Guarded by mutex_.
  GrpcConnectionLedger ledger_;              // Guarded by mutex_.
  grpc::Server* server_ = nullptr;           // Guarded by mutex_.
  bool stopped_ = false;                     // Guarded by mutex_.
  int running_handlers_ = 0;                 // Guarded by mutex_.
  bool accept_exhausted_ = false;            // Guarded by mutex_.
  std::atomic<std::uint64_t> refused_{0};
  std::uint16_t tcp_port_ = 0;  // Set by Listen, before any handler.
  // The unix socket's file, once bound; removed by Stop(). Guarded by mutex_ once Serve ran.
  std::optional<BoundSocketFile> socket_file_;
};

Result<std::unique_ptr<GrpcListener>> GrpcListener::Create(boost::asio::io_context& io_context,
                                                           const Options& options) {
  auto core = std::make_shared<Core>(io_context, options);
  HURRAY_RETURN_IF_ERROR(core->Listen());
  return std::unique_ptr<GrpcListener>(new GrpcListener(std::move(core)));
}

GrpcListener::GrpcListener(std::shared_ptr<Core> core) : core_(std::move(core)) {}

GrpcListener::~GrpcListener() { Stop(); }  // NOLINT(bugprone-exception-escape)

void GrpcListener::Serve(grpc::Server& server) { core_->Serve(server); }

void GrpcListener::Stop() { core_->Stop(); }

std::optional<PeerKey> GrpcListener::PeerOf(std::string_view grpc_peer) const {
  return core_->PeerOf(grpc_peer);
}

std::size_t GrpcListener::connection_count() const { return core_->connection_count(); }

std::uint64_t GrpcListener::refused_count() const { return core_->refused_count(); }

std::uint16_t GrpcListener::tcp_port() const { return core_->tcp_port(); }

}  // namespace hurray::daemon
