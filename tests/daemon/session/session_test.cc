// SessionServer and SessionConnection together: a server on io_context threads over a
// socket in a temporary directory, a test SessionHost, and real clients (threads, raw
// sockets that misbehave, and a forked process that is killed with SIGKILL).
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"
#include "session/session_host.h"
#include "session/session_server.h"
#include "session_connection.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray {
namespace {

using client::GrantedSegment;
using client::SessionConnection;
using daemon::SegmentAccess;
using daemon::SessionGrant;
using daemon::SessionHost;
using daemon::SessionLimits;
using daemon::SessionServer;
using ::hurray::testing::TempDir;
using std::chrono::seconds;

// Bound on every wait for something another thread or process does; never reached when
// the code works.
constexpr auto kPatience = seconds(20);
constexpr std::uint64_t kSegmentSize = 4096;
constexpr std::uint64_t kDaemonEpoch = 42;

// What segment `id` holds: a line of text, then zeros up to kSegmentSize.
std::string SegmentContent(std::uint64_t segment_id) {
  std::string content = "segment " + std::to_string(segment_id) + " content";
  content.resize(kSegmentSize, '\0');
  return content;
}

// Polls `done` until it holds or kPatience has passed.
template <typename Predicate>
bool Eventually(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Records sessions; grants memfd segments 1 and 2 of known content, refuses write access
// to segment 2 and every other segment. Refuses sessions to a client named "refused".
// Records slab reports of segment 1 and refuses others (NOT_FOUND). Thread-safe.
class TestHost final : public SessionHost {
 public:
  struct OpenedSession {
    PeerCredentials peer;
    std::string client_name;
  };

  Result<SessionGrant> OpenSession(const PeerCredentials& peer,
                                   std::string_view client_name) override {
    std::lock_guard lock(mutex_);
    if (client_name == "refused") {
      return std::unexpected(Error(StatusCode::kPermissionDenied,
                                   "uid " + std::to_string(peer.uid) + " may not open a session"));
    }
    const std::uint64_t id = next_session_id_++;
    opened_[id] = OpenedSession{.peer = peer, .client_name = std::string(client_name)};
    return SessionGrant{.session_id = id, .token = "token-" + std::to_string(id)};
  }

  void CloseSession(std::uint64_t session_id) override {
    std::vector<AcquireDone> ended;
    {
      std::lock_guard lock(mutex_);
      if (!opened_.contains(session_id)) ++closes_of_unknown_sessions_;
      ++closes_[session_id];
      for (auto it = waits_.begin(); it != waits_.end();) {
        if (it->session_id != session_id) {
          ++it;
          continue;
        }
        ended.push_back(std::move(it->done));
        it = waits_.erase(it);
      }
      changed_.notify_all();
    }
    // As the registry: the session's waits end with it, outside the host's lock.
    for (AcquireDone& done : ended) done(CancelledError("the session ended while waiting"));
  }

  // Acquires of a name not published yet wait until PublishNow (or a publish on the socket)
  // answers them, on the publishing thread; a published name is answered at once.
  void AcquireWaiting(std::uint64_t session_id, const v1::AcquireRequest& request,
                      AcquireDone done) override {
    std::unique_lock lock(mutex_);
    if (const auto found = published_.find(request.name()); found != published_.end()) {
      v1::AcquireResponse response = AcquireAnswer(request.name(), found->second);
      lock.unlock();
      done(std::move(response));
      return;
    }
    waits_.push_back(
        Wait{.session_id = session_id, .name = request.name(), .done = std::move(done)});
    changed_.notify_all();
  }
  [[nodiscard]] bool ServesAcquireWaits() const override { return true; }

  Result<v1::PublishResponse> Publish(std::uint64_t /*session_id*/,
                                      const v1::PublishRequest& request) override {
    PublishNow(request.name());
    v1::PublishResponse response;
    response.set_name(request.name());
    response.set_version(1);
    return response;
  }

  // Publishes `name`, its answers carrying a pool name of `padding` bytes: every acquire
  // waiting for it is answered, on this thread.
  void PublishNow(const std::string& name, std::size_t padding = 0) {
    std::vector<std::pair<AcquireDone, v1::AcquireResponse>> answered;
    {
      std::lock_guard lock(mutex_);
      published_[name] = padding;
      for (auto it = waits_.begin(); it != waits_.end();) {
        if (it->name != name) {
          ++it;
          continue;
        }
        answered.emplace_back(std::move(it->done), AcquireAnswer(name, padding));
        it = waits_.erase(it);
      }
    }
    for (auto& [done, response] : answered) done(std::move(response));
  }

  std::size_t waiting() const {
    std::lock_guard lock(mutex_);
    return waits_.size();
  }
  // Waits (at most kPatience) until `count` acquires wait.
  bool WaitForWaiting(std::size_t count) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kPatience, [&] { return waits_.size() >= count; });
  }

  Result<SegmentAccess> GrantSegment(std::uint64_t session_id, std::uint64_t segment_id,
                                     bool writable) override {
    {
      std::lock_guard lock(mutex_);
      ++grants_;
      if (!opened_.contains(session_id) || closes_.contains(session_id)) {
        ++grants_outside_sessions_;
        return FailedPreconditionError("session " + std::to_string(session_id) + " is not open");
      }
    }
    if (segment_id != 1 && segment_id != 2) {
      return NotFoundError("segment_id " + std::to_string(segment_id) + " names no segment");
    }
    if (segment_id == 2 && writable) {
      return std::unexpected(
          Error(StatusCode::kPermissionDenied,
                "segment 2: session " + std::to_string(session_id) + " may not write to it"));
    }
    UniqueFd memory(::memfd_create("hurray-test-segment", MFD_CLOEXEC));
    if (!memory) return InternalError("memfd_create failed");
    const std::string content = SegmentContent(segment_id);
    if (::pwrite(memory.get(), content.data(), content.size(), 0) !=
        static_cast<ssize_t>(content.size())) {
      return InternalError("pwrite failed");
    }
    // A descriptor of its own access mode, like the daemon's O_RDONLY shm_open.
    const std::string path = "/proc/self/fd/" + std::to_string(memory.get());
    UniqueFd access(::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
    if (!access) return InternalError("open " + path + " failed");
    return SegmentAccess{.fd = std::move(access),
                         .segment_size = kSegmentSize,
                         .writable = writable,
                         .page_size = segment_id == 1 ? std::uint64_t{2} << 20 : 4096};
  }

  Result<v1::SlabMappedAck> SlabMapped(std::uint64_t session_id,
                                       const v1::SlabMapped& request) override {
    if (request.segment_id() != 1) {
      return NotFoundError("segment_id " + std::to_string(request.segment_id()) + " names no slab");
    }
    std::lock_guard lock(mutex_);
    slab_reports_.push_back(std::to_string(session_id) + ":" +
                            std::to_string(request.segment_id()) +
                            (request.read_only() ? ":ro" : ":rw"));
    return v1::SlabMappedAck();
  }

  // Leases 1 to 3 exist until released; the registry's rule: the leases before the first
  // unknown one end, it and those after it do not.
  Result<v1::ReleaseResponse> Release(std::uint64_t /*session_id*/,
                                      const v1::ReleaseRequest& request) override {
    // As the registry: every lease it knows ends, and the first unknown one is named.
    std::lock_guard lock(mutex_);
    std::optional<std::uint64_t> unknown;
    for (const std::uint64_t lease_id : request.lease_ids()) {
      if (lease_id < 1 || lease_id > 3 || released_.contains(lease_id)) {
        if (!unknown) unknown = lease_id;
        continue;
      }
      released_.insert(lease_id);
    }
    if (unknown) {
      return NotFoundError("lease_id " + std::to_string(*unknown) +
                           " is not a lease of this session");
    }
    return v1::ReleaseResponse();
  }

  std::set<std::uint64_t> released() const {
    std::lock_guard lock(mutex_);
    return released_;
  }
  std::size_t open_count() const {
    std::lock_guard lock(mutex_);
    return opened_.size();
  }
  std::vector<std::string> slab_reports() const {
    std::lock_guard lock(mutex_);
    return slab_reports_;
  }
  std::optional<OpenedSession> opened(std::uint64_t session_id) const {
    std::lock_guard lock(mutex_);
    auto found = opened_.find(session_id);
    if (found == opened_.end()) return std::nullopt;
    return found->second;
  }
  int close_count(std::uint64_t session_id) const {
    std::lock_guard lock(mutex_);
    auto found = closes_.find(session_id);
    return found == closes_.end() ? 0 : found->second;
  }
  std::size_t closed_session_count() const {
    std::lock_guard lock(mutex_);
    return closes_.size();
  }
  int closes_of_unknown_sessions() const {
    std::lock_guard lock(mutex_);
    return closes_of_unknown_sessions_;
  }
  int grant_count() const {
    std::lock_guard lock(mutex_);
    return grants_;
  }
  int grants_outside_sessions() const {
    std::lock_guard lock(mutex_);
    return grants_outside_sessions_;
  }

  // Waits (at most kPatience) until CloseSession was called for `session_id`.
  bool WaitForClose(std::uint64_t session_id) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kPatience, [&] { return closes_.contains(session_id); });
  }
  // Waits (at most kPatience) until `count` sessions were closed.
  bool WaitForClosedSessions(std::size_t count) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kPatience, [&] { return closes_.size() >= count; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t next_session_id_ = 100;
  std::map<std::uint64_t, OpenedSession> opened_;
  std::map<std::uint64_t, int> closes_;
  int closes_of_unknown_sessions_ = 0;
  int grants_ = 0;
  int grants_outside_sessions_ = 0;
  std::vector<std::string> slab_reports_;  // "session:segment:ro|rw", in order.
  std::set<std::uint64_t> released_;

  struct Wait {
    std::uint64_t session_id;
    std::string name;
    AcquireDone done;
  };
  // An acquire's answer for `name`: a new lease, the name, a pool name of `padding` bytes.
  v1::AcquireResponse AcquireAnswer(const std::string& name, std::size_t padding) {
    v1::AcquireResponse response;
    response.set_lease_id(next_lease_id_++);
    response.mutable_tensor()->set_name(name);
    response.mutable_tensor()->set_pool(std::string(padding, 'p'));
    response.set_daemon_epoch(kDaemonEpoch);
    return response;
  }
  std::vector<Wait> waits_;
  std::map<std::string, std::size_t> published_;  // Name -> its answers' padding.
  std::uint64_t next_lease_id_ = 1000;
};

Status SendMessage(int socket, const v1::SessionMessage& message) {
  const std::string bytes = message.SerializeAsString();
  return SendFrame(socket,
                   std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

// The next frame on a raw socket, read by a reader of its own: for a socket on which the
// server has sent nothing after it but perhaps the end of stream (a reader may read past
// the frame it returns).
Result<Frame> ReceiveOneFrame(int socket) { return FrameReader().Next(socket); }

// The next message on `socket`, read by `reader`, which keeps what it read past it.
Result<v1::SessionMessage> ReceiveMessageWith(FrameReader& reader, int socket) {
  auto frame = reader.Next(socket);
  if (!frame) return std::unexpected(frame.error());
  v1::SessionMessage message;
  if (!message.ParseFromArray(frame->payload.data(), static_cast<int>(frame->payload.size()))) {
    return InternalError("reply does not parse");
  }
  return message;
}

// The next message on a raw socket, read as ReceiveOneFrame reads.
Result<v1::SessionMessage> ReceiveMessage(int socket) {
  FrameReader reader;
  return ReceiveMessageWith(reader, socket);
}

// The Threads: line of /proc/self/status; -1 when it cannot be read.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

// Whether the server has sent something on `socket` that waits to be read.
bool HasPendingBytes(int socket) {
  int unread = 0;
  return ::ioctl(socket, FIONREAD, &unread) == 0 && unread > 0;
}

v1::SessionMessage Hello(std::uint32_t version = kSessionProtocolVersion) {
  v1::SessionMessage message;
  message.mutable_hello()->set_protocol_version(version);
  message.mutable_hello()->set_client_name("raw-test-client");
  return message;
}

class SessionServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(directory_, TempDir::Create("hurray-session"));
    // The "run" directory does not exist yet: readied as the daemon readies its sockets.
    socket_path_ = directory_->Path("run/session.sock");
    ASSERT_OK(PrepareSocketPath(socket_path_));
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_context_.run(); });
    auto server = SessionServer::Create(io_context_, socket_path_, host_, kDaemonEpoch);
    ASSERT_OK(server);
    server_ = std::move(*server);
  }

  void TearDown() override {
    server_.reset();
    work_.reset();
    io_context_.stop();
    for (std::thread& thread : threads_) thread.join();
    directory_.reset();
  }

  // Replaces the server with one of `limits` on the same socket.
  void RestartServer(SessionLimits limits) {
    server_.reset();
    auto server =
        SessionServer::Create(io_context_, socket_path_, host_, kDaemonEpoch, 0660, limits);
    ASSERT_OK(server);
    server_ = std::move(*server);
  }

  std::unique_ptr<SessionConnection> ConnectClient(std::string_view name = "test-client") {
    auto connection = SessionConnection::Connect(socket_path_, name);
    EXPECT_OK(connection);
    return connection ? std::move(*connection) : nullptr;
  }

  UniqueFd ConnectRaw() {
    auto socket = ConnectUnixSocket(socket_path_);
    EXPECT_OK(socket);
    return socket ? std::move(*socket) : UniqueFd();
  }

  // Sends a hello on a raw socket and returns the session id of the welcome.
  std::uint64_t OpenRawSession(int socket) {
    EXPECT_OK(SendMessage(socket, Hello()));
    auto welcome = ReceiveMessage(socket);
    EXPECT_OK(welcome);
    if (!welcome) return 0;
    EXPECT_TRUE(welcome->has_welcome());
    return welcome->welcome().session_id();
  }

  TestHost host_;
  boost::asio::io_context io_context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_context_);
  std::vector<std::thread> threads_;
  std::optional<TempDir> directory_;
  std::string socket_path_;
  std::unique_ptr<SessionServer> server_;
};

TEST_F(SessionServerTest, WelcomeCarriesTokenAndPeerCredentials) {
  auto connection = ConnectClient("weights-loader");
  ASSERT_NE(connection, nullptr);
  const std::uint64_t id = connection->session_id();
  EXPECT_EQ(connection->token(), "token-" + std::to_string(id));
  EXPECT_EQ(connection->daemon_epoch(), kDaemonEpoch);
  EXPECT_EQ(connection->peer_credentials().pid, ::getpid());
  EXPECT_EQ(connection->peer_credentials().uid, ::getuid());
  EXPECT_EQ(connection->peer_credentials().gid, ::getgid());

  auto opened = host_.opened(id);
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(opened->client_name, "weights-loader");
  EXPECT_EQ(opened->peer.pid, ::getpid());
  EXPECT_EQ(opened->peer.uid, ::getuid());
  EXPECT_EQ(host_.close_count(id), 0);
}

TEST_F(SessionServerTest, CreatesSocketWithGroupModeInNewDirectory) {
  struct stat socket_info{};
  ASSERT_EQ(::lstat(socket_path_.c_str(), &socket_info), 0);
  EXPECT_TRUE(S_ISSOCK(socket_info.st_mode));
  EXPECT_EQ(socket_info.st_mode & 0777, 0660u);
  struct stat directory_info{};
  ASSERT_EQ(::stat(directory_->Path("run").c_str(), &directory_info), 0);
  EXPECT_EQ(directory_info.st_mode & 0777, 0755u);
  EXPECT_EQ(server_->socket_path(), socket_path_);
}

TEST_F(SessionServerTest, GrantedReadOnlyDescriptorMapsForReadingOnly) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  auto segment = connection->MapSegment(1, /*writable=*/false);
  ASSERT_OK(segment);
  EXPECT_EQ(segment->size, kSegmentSize);
  EXPECT_EQ(segment->page_size, std::uint64_t{2} << 20);  // The pool's, as the host said.
  EXPECT_FALSE(segment->writable);
  ASSERT_TRUE(segment->fd.valid());
  EXPECT_EQ(::fcntl(segment->fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(::fcntl(segment->fd.get(), F_GETFD) & FD_CLOEXEC, 0);

  void* mapping = ::mmap(nullptr, kSegmentSize, PROT_READ, MAP_SHARED, segment->fd.get(), 0);
  ASSERT_NE(mapping, MAP_FAILED);
  EXPECT_EQ(std::string(static_cast<const char*>(mapping), kSegmentSize), SegmentContent(1));
  ASSERT_EQ(::munmap(mapping, kSegmentSize), 0);

  // The kernel refuses a shared writable mapping of a read-only descriptor.
  errno = 0;
  EXPECT_EQ(::mmap(nullptr, kSegmentSize, PROT_READ | PROT_WRITE, MAP_SHARED, segment->fd.get(), 0),
            MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
}

TEST_F(SessionServerTest, GrantedWritableDescriptorMapsForWriting) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  auto segment = connection->MapSegment(1, /*writable=*/true);
  ASSERT_OK(segment);
  EXPECT_TRUE(segment->writable);
  EXPECT_EQ(::fcntl(segment->fd.get(), F_GETFL) & O_ACCMODE, O_RDWR);
  void* mapping =
      ::mmap(nullptr, kSegmentSize, PROT_READ | PROT_WRITE, MAP_SHARED, segment->fd.get(), 0);
  ASSERT_NE(mapping, MAP_FAILED);
  static_cast<char*>(mapping)[0] = 'S';
  EXPECT_EQ(static_cast<const char*>(mapping)[1], 'e');
  ASSERT_EQ(::munmap(mapping, kSegmentSize), 0);
}

TEST_F(SessionServerTest, RefusalsArriveWithCodeAndMessageAndSessionGoesOn) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  const std::string session = std::to_string(connection->session_id());
  EXPECT_ERROR(connection->MapSegment(2, /*writable=*/true), StatusCode::kPermissionDenied,
               {"segment 2: session " + session + " may not write to it"});
  EXPECT_ERROR(connection->MapSegment(99, /*writable=*/false), StatusCode::kNotFound,
               {"segment_id 99 names no segment"});
  auto segment = connection->MapSegment(2, /*writable=*/false);
  ASSERT_OK(segment);
  EXPECT_EQ(segment->size, kSegmentSize);
  EXPECT_EQ(segment->page_size, 4096u);
  EXPECT_EQ(host_.close_count(connection->session_id()), 0);
}

TEST_F(SessionServerTest, RefusedSessionReportsHostErrorAndIsNeverClosed) {
  EXPECT_ERROR(SessionConnection::Connect(socket_path_, "refused"), StatusCode::kPermissionDenied,
               {"may not open a session"});
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  EXPECT_EQ(host_.open_count(), 0u);
  EXPECT_EQ(host_.closed_session_count(), 0u);
}

TEST_F(SessionServerTest, ConnectWithoutDaemonIsUnavailable) {
  server_->Stop();
  EXPECT_ERROR(SessionConnection::Connect(socket_path_, "too-late"), StatusCode::kUnavailable,
               {"connect " + socket_path_});
}

TEST_F(SessionServerTest, DestroyingClientClosesSessionOnce) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  const std::uint64_t id = connection->session_id();
  ASSERT_OK(connection->MapSegment(1, false));
  EXPECT_EQ(server_->connection_count(), 1u);
  connection.reset();
  ASSERT_TRUE(host_.WaitForClose(id));
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  EXPECT_EQ(host_.close_count(id), 1);
  EXPECT_EQ(host_.closes_of_unknown_sessions(), 0);
}

TEST_F(SessionServerTest, KilledClientProcessClosesSessionOnce) {
  // Warm up protobuf's lazily built defaults here, so that the child only runs code that
  // is safe after fork() in a process with threads.
  {
    auto warm = ConnectClient("warm-up");
    ASSERT_NE(warm, nullptr);
    const std::uint64_t warm_id = warm->session_id();
    warm.reset();
    ASSERT_TRUE(host_.WaitForClose(warm_id));
  }
  std::array<int, 2> ready{};
  ASSERT_EQ(::pipe2(ready.data(), O_CLOEXEC), 0);
  UniqueFd ready_read(ready[0]);
  UniqueFd ready_write(ready[1]);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ready_read.Reset();
    auto connection = SessionConnection::Connect(socket_path_, "doomed-child");
    const std::uint64_t id = connection ? (*connection)->session_id() : 0;
    if (::write(ready_write.get(), &id, sizeof(id)) != sizeof(id)) ::_exit(2);
    while (true) ::pause();  // Until SIGKILL.
  }
  ready_write.Reset();

  std::uint64_t id = 0;
  pollfd entry{.fd = ready_read.get(), .events = POLLIN, .revents = 0};
  const int ready_count =
      ::poll(&entry, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count()));
  const bool got_id = ready_count == 1 &&
                      ::read(ready_read.get(), &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(got_id) << "the child did not report its session";
  ASSERT_NE(id, 0u) << "the child could not connect";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  auto opened = host_.opened(id);
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(opened->peer.pid, child);
  EXPECT_EQ(opened->client_name, "doomed-child");
  ASSERT_TRUE(host_.WaitForClose(id));
  EXPECT_EQ(host_.close_count(id), 1);
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
}

TEST_F(SessionServerTest, GarbageBeforeHelloIsRejectedWithoutSession) {
  UniqueFd socket = ConnectRaw();
  const std::array<std::uint8_t, 3> garbage = {0xFF, 0xFF, 0xFF};
  ASSERT_OK(SendFrame(socket.get(), garbage));
  auto reply = ReceiveMessage(socket.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(reply->error().message().find("does not parse"), std::string::npos)
      << reply->error().message();
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  EXPECT_EQ(host_.open_count(), 0u);
  EXPECT_EQ(host_.closed_session_count(), 0u);
}

TEST_F(SessionServerTest, FirstMessageMustBeHello) {
  UniqueFd socket = ConnectRaw();
  v1::SessionMessage request;
  request.set_request_id(7);
  request.mutable_map_segment()->set_segment_id(1);
  ASSERT_OK(SendMessage(socket.get(), request));
  auto reply = ReceiveMessage(socket.get());
  ASSERT_OK(reply);
  EXPECT_EQ(reply->request_id(), 7u);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  EXPECT_EQ(reply->error().message(), "the first session message must be a hello, not map_segment");
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  EXPECT_EQ(host_.open_count(), 0u);
}

TEST_F(SessionServerTest, UnsupportedProtocolVersionIsRejected) {
  UniqueFd socket = ConnectRaw();
  ASSERT_OK(SendMessage(socket.get(), Hello(2)));
  auto reply = ReceiveMessage(socket.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(reply->error().message().find("hello.protocol_version 2"), std::string::npos)
      << reply->error().message();
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  EXPECT_EQ(host_.open_count(), 0u);
}

TEST_F(SessionServerTest, OversizedLengthPrefixDisconnectsWithoutSession) {
  UniqueFd socket = ConnectRaw();
  const std::array<std::uint8_t, 4> header = {0xFF, 0xFF, 0xFF, 0xFF};
  ASSERT_EQ(::send(socket.get(), header.data(), header.size(), MSG_NOSIGNAL), 4);
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  EXPECT_EQ(host_.open_count(), 0u);
  EXPECT_EQ(host_.closed_session_count(), 0u);
}

TEST_F(SessionServerTest, GarbageAfterWelcomeClosesOpenSessionOnce) {
  UniqueFd socket = ConnectRaw();
  const std::uint64_t id = OpenRawSession(socket.get());
  ASSERT_NE(id, 0u);
  const std::array<std::uint8_t, 2> garbage = {0x0F, 0x00};
  ASSERT_OK(SendFrame(socket.get(), garbage));
  auto reply = ReceiveMessage(socket.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  ASSERT_TRUE(host_.WaitForClose(id));
  EXPECT_EQ(host_.close_count(id), 1);
}

TEST_F(SessionServerTest, OversizedFrameAfterWelcomeClosesOpenSessionOnce) {
  UniqueFd socket = ConnectRaw();
  const std::uint64_t id = OpenRawSession(socket.get());
  ASSERT_NE(id, 0u);
  const std::array<std::uint8_t, 4> header = {0x01, 0x00, 0x10, 0x00};  // 1 MiB + 1.
  ASSERT_EQ(::send(socket.get(), header.data(), header.size(), MSG_NOSIGNAL), 4);
  EXPECT_ERROR(ReceiveOneFrame(socket.get()), StatusCode::kUnavailable);
  ASSERT_TRUE(host_.WaitForClose(id));
  EXPECT_EQ(host_.close_count(id), 1);
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
}

TEST_F(SessionServerTest, RepliesAreNotRequestsSoTheyCloseTheSession) {
  UniqueFd socket = ConnectRaw();
  const std::uint64_t id = OpenRawSession(socket.get());
  ASSERT_NE(id, 0u);
  v1::SessionMessage second_hello = Hello();
  second_hello.set_request_id(3);
  ASSERT_OK(SendMessage(socket.get(), second_hello));
  auto reply = ReceiveMessage(socket.get());
  ASSERT_OK(reply);
  EXPECT_EQ(reply->request_id(), 3u);
  ASSERT_TRUE(reply->has_error());
  EXPECT_NE(reply->error().message().find("hello is not a request"), std::string::npos)
      << reply->error().message();
  ASSERT_TRUE(host_.WaitForClose(id));
  EXPECT_EQ(host_.close_count(id), 1);
}

TEST_F(SessionServerTest, SlabReportsReachTheHostAndAreAcknowledged) {
  UniqueFd socket = ConnectRaw();
  const std::uint64_t id = OpenRawSession(socket.get());
  ASSERT_NE(id, 0u);
  v1::SessionMessage report;
  report.set_request_id(5);
  report.mutable_slab_mapped()->set_segment_id(1);
  report.mutable_slab_mapped()->set_read_only(true);
  ASSERT_OK(SendMessage(socket.get(), report));
  auto acked = ReceiveMessage(socket.get());
  ASSERT_OK(acked);
  EXPECT_EQ(acked->request_id(), 5u);
  EXPECT_TRUE(acked->has_slab_mapped_ack()) << acked->DebugString();
  EXPECT_EQ(host_.slab_reports(), (std::vector<std::string>{std::to_string(id) + ":1:ro"}));

  // The host's refusal reaches the client with its code; the session goes on.
  report.set_request_id(6);
  report.mutable_slab_mapped()->set_segment_id(7);
  ASSERT_OK(SendMessage(socket.get(), report));
  auto refused = ReceiveMessage(socket.get());
  ASSERT_OK(refused);
  EXPECT_EQ(refused->request_id(), 6u);
  ASSERT_TRUE(refused->has_error());
  EXPECT_EQ(refused->error().code(), static_cast<std::uint32_t>(StatusCode::kNotFound));
  EXPECT_EQ(host_.close_count(id), 0);
}

TEST_F(SessionServerTest, PipelinedRequestsAreAnsweredInOrderOneDescriptorAtATime) {
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  constexpr std::uint64_t kRequests = 20;
  std::string requests;
  for (std::uint64_t id = 1; id <= kRequests; ++id) {
    v1::SessionMessage request;
    request.set_request_id(id);
    request.mutable_map_segment()->set_segment_id(1 + id % 2);
    const std::string bytes = request.SerializeAsString();
    const auto length = static_cast<std::uint32_t>(bytes.size());
    for (int shift = 0; shift < 32; shift += 8) {
      requests.push_back(static_cast<char>((length >> shift) & 0xFF));
    }
    requests += bytes;
  }
  // All requests in one write: the server finds them queued behind each other.
  ASSERT_EQ(::send(socket.get(), requests.data(), requests.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(requests.size()));

  // The second grant is ready, but its descriptor waits until the first reply is read.
  ASSERT_TRUE(Eventually([&] { return host_.grant_count() >= 2; }));
  int unread = 0;
  ASSERT_EQ(::ioctl(socket.get(), FIONREAD, &unread), 0);
  FrameReader reader;
  auto first = reader.Next(socket.get());
  ASSERT_OK(first);
  EXPECT_EQ(static_cast<std::size_t>(unread), kSessionFrameHeaderBytes + first->payload.size());
  EXPECT_TRUE(first->fd.valid());

  for (std::uint64_t id = 2; id <= kRequests; ++id) {
    auto frame = reader.Next(socket.get());
    ASSERT_OK(frame);
    v1::SessionMessage reply;
    ASSERT_TRUE(
        reply.ParseFromArray(frame->payload.data(), static_cast<int>(frame->payload.size())));
    EXPECT_EQ(reply.request_id(), id);
    ASSERT_TRUE(reply.has_segment_granted()) << reply.DebugString();
    EXPECT_EQ(reply.segment_granted().segment_id(), 1 + id % 2);
    EXPECT_TRUE(frame->fd.valid());
  }
  EXPECT_EQ(host_.grant_count(), static_cast<int>(kRequests));
}

TEST_F(SessionServerTest, DescriptorSentByClientIsClosed) {
  std::array<int, 2> pipe_ends{};
  ASSERT_EQ(::pipe2(pipe_ends.data(), O_CLOEXEC), 0);
  UniqueFd read_end(pipe_ends[0]);
  UniqueFd write_end(pipe_ends[1]);
  UniqueFd socket = ConnectRaw();
  const std::string hello = Hello().SerializeAsString();
  ASSERT_OK(SendFrame(socket.get(),
                      std::span(reinterpret_cast<const std::uint8_t*>(hello.data()), hello.size()),
                      write_end.get()));
  write_end.Reset();
  auto welcome = ReceiveMessage(socket.get());
  ASSERT_OK(welcome);
  EXPECT_TRUE(welcome->has_welcome());
  // The daemon's copy was the last write end: the pipe hangs up once it is closed.
  pollfd entry{.fd = read_end.get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(::poll(&entry, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())), 1);
  char byte = 0;
  EXPECT_EQ(::read(read_end.get(), &byte, 1), 0);
}

TEST_F(SessionServerTest, StopClosesClientsAndTheirSessions) {
  std::vector<std::unique_ptr<SessionConnection>> connections;
  for (int i = 0; i < 3; ++i) {
    connections.push_back(ConnectClient());
    ASSERT_NE(connections.back(), nullptr);
  }
  UniqueFd no_hello_yet = ConnectRaw();
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 4; }));

  server_->Stop();
  // Stop() from a thread outside the io_context returns after the host heard of every end.
  for (const auto& connection : connections) {
    EXPECT_EQ(host_.close_count(connection->session_id()), 1);
  }
  EXPECT_EQ(host_.closed_session_count(), 3u);
  EXPECT_EQ(server_->connection_count(), 0u);
  struct stat info{};
  EXPECT_NE(::lstat(socket_path_.c_str(), &info), 0);

  for (const auto& connection : connections) {
    EXPECT_ERROR(connection->MapSegment(1, false), StatusCode::kUnavailable);
    EXPECT_ERROR(connection->MapSegment(1, false), StatusCode::kUnavailable);
  }
  EXPECT_ERROR(ReceiveOneFrame(no_hello_yet.get()), StatusCode::kUnavailable);

  server_->Stop();  // Idempotent.
  EXPECT_EQ(host_.closed_session_count(), 3u);
  connections.clear();
  server_.reset();
  EXPECT_EQ(host_.closed_session_count(), 3u);
  EXPECT_EQ(host_.closes_of_unknown_sessions(), 0);
  EXPECT_EQ(host_.grants_outside_sessions(), 0);
}

TEST_F(SessionServerTest, ManyConcurrentClients) {
  constexpr int kClients = 64;
  constexpr int kRequestsPerClient = 8;
  std::atomic<int> failures{0};
  std::mutex ids_mutex;
  std::set<std::uint64_t> ids;
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto connection = SessionConnection::Connect(socket_path_, "client-" + std::to_string(i));
      if (!connection) {
        ++failures;
        return;
      }
      {
        std::lock_guard lock(ids_mutex);
        ids.insert((*connection)->session_id());
      }
      for (int request = 0; request < kRequestsPerClient; ++request) {
        const std::uint64_t segment_id = 1 + static_cast<std::uint64_t>((i + request) % 2);
        auto segment = (*connection)->MapSegment(segment_id, false);
        std::string content(kSegmentSize, '\0');
        if (!segment ||
            ::pread(segment->fd.get(), content.data(), content.size(), 0) !=
                static_cast<ssize_t>(kSegmentSize) ||
            content != SegmentContent(segment_id)) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kClients));
  ASSERT_TRUE(host_.WaitForClosedSessions(kClients));
  for (std::uint64_t id : ids) EXPECT_EQ(host_.close_count(id), 1) << "session " << id;
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  EXPECT_EQ(host_.grants_outside_sessions(), 0);
}

// ---- Limits ----

TEST_F(SessionServerTest, ThousandsOfIdleConnectionsCostNoThreadsAndOthersAreServed) {
  constexpr std::size_t kIdle = 3000;
  // Both ends of every connection live in this process.
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  const rlim_t needed = 2 * kIdle + 256;
  if (files.rlim_max < needed) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below " << needed;
  const rlimit saved = files;
  files.rlim_cur = std::max(files.rlim_cur, needed);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  RestartServer({.max_sessions = 0,
                 .max_sessions_per_uid = 0,
                 .hello_timeout = std::chrono::milliseconds(0)});
  const int threads_before = ThreadCount();
  ASSERT_GT(threads_before, 0);
  std::vector<UniqueFd> idle;
  idle.reserve(kIdle);
  for (std::size_t i = 0; i < kIdle; ++i) {
    idle.push_back(ConnectRaw());
    ASSERT_TRUE(idle.back().valid()) << "connection " << i;
  }
  ASSERT_TRUE(Eventually([&] { return server_->connection_count() == kIdle; }))
      << "the server counts " << server_->connection_count() << " of " << kIdle
      << " connections; refused " << server_->refused_connection_count();
  EXPECT_EQ(ThreadCount(), threads_before);

  auto client = ConnectClient("busy");
  ASSERT_NE(client, nullptr);
  ASSERT_OK_AND_ASSIGN(GrantedSegment segment, client->MapSegment(1, false));
  EXPECT_EQ(segment.size, kSegmentSize);
  EXPECT_EQ(ThreadCount(), threads_before);
  EXPECT_EQ(server_->refused_connection_count(), 0u);

  idle.clear();
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 1; }));
  client.reset();
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST_F(SessionServerTest, ConnectionBeyondPerUidCapIsRefusedNamingTheCap) {
  RestartServer({.max_sessions = 10, .max_sessions_per_uid = 2});
  auto first = ConnectClient("first");
  auto second = ConnectClient("second");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  UniqueFd third = ConnectRaw();
  auto reply = ReceiveMessage(third.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kResourceExhausted));
  EXPECT_NE(reply->error().message().find("uid " + std::to_string(::getuid()) +
                                          ": max_sessions_per_uid 2 reached"),
            std::string::npos)
      << reply->error().message();
  EXPECT_ERROR(ReceiveOneFrame(third.get()), StatusCode::kUnavailable);
  EXPECT_EQ(server_->refused_connection_count(), 1u);
  EXPECT_EQ(host_.open_count(), 2u);
  // The admitted sessions go on, and a closed one makes room.
  EXPECT_OK(first->MapSegment(1, false));
  first.reset();
  ASSERT_TRUE(Eventually([&] { return server_->connection_count() == 1; }));
  EXPECT_NE(ConnectClient("after"), nullptr);
}

TEST_F(SessionServerTest, ConnectionBeyondGlobalCapIsRefusedNamingTheCap) {
  RestartServer({.max_sessions = 1, .max_sessions_per_uid = 0});
  auto admitted = ConnectClient("admitted");
  ASSERT_NE(admitted, nullptr);
  auto refused = SessionConnection::Connect(socket_path_, "refused-by-cap");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("max_sessions 1 reached"), std::string::npos)
      << refused.error().ToString();
  EXPECT_EQ(server_->refused_connection_count(), 1u);
  EXPECT_OK(admitted->MapSegment(2, false));
}

TEST_F(SessionServerTest, ConnectionWithoutHelloIsClosedAtTheDeadline) {
  RestartServer({.hello_timeout = std::chrono::milliseconds(100)});
  UniqueFd silent = ConnectRaw();
  auto reply = ReceiveMessage(silent.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kDeadlineExceeded));
  EXPECT_NE(reply->error().message().find("no hello within hello_timeout_ms 100"),
            std::string::npos)
      << reply->error().message();
  EXPECT_ERROR(ReceiveOneFrame(silent.get()), StatusCode::kUnavailable);
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  // A client that says hello in time keeps its session past the deadline.
  auto prompt = ConnectClient("prompt");
  ASSERT_NE(prompt, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_OK(prompt->MapSegment(1, false));
  EXPECT_EQ(host_.open_count(), 1u);
}

TEST_F(SessionServerTest, ConnectionStoppedInsideAFrameIsClosedAtTheFrameDeadline) {
  RestartServer({.frame_timeout = std::chrono::milliseconds(200)});
  UniqueFd stalled = ConnectRaw();
  ASSERT_NE(OpenRawSession(stalled.get()), 0u);
  // The length prefix of the largest frame, and 1,000 of its bytes: the rest never comes.
  std::vector<std::uint8_t> start = {0x00, 0x00, 0x10, 0x00};
  start.resize(start.size() + 1000, 0x0A);
  ASSERT_EQ(::send(stalled.get(), start.data(), start.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(start.size()));
  auto reply = ReceiveMessage(stalled.get());
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(reply->error().code(), static_cast<std::uint32_t>(StatusCode::kDeadlineExceeded));
  EXPECT_NE(reply->error().message().find("did not arrive whole within frame_timeout_ms 200"),
            std::string::npos)
      << reply->error().message();
  EXPECT_TRUE(host_.WaitForClosedSessions(1));
  EXPECT_TRUE(Eventually([&] { return server_->connection_count() == 0; }));
  // Frames that come whole, however far apart, keep the session.
  auto steady = ConnectClient("steady");
  ASSERT_NE(steady, nullptr);
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_OK(steady->MapSegment(1, false));
  }
}

TEST_F(SessionServerTest, DescriptorsTrickledInsideAFrameAreClosedAsTheyArrive) {
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  const auto open_descriptors = [] {
    const auto entries = std::filesystem::directory_iterator("/proc/self/fd");
    return std::distance(begin(entries), end(entries));
  };
  UniqueFd null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(null_device.valid());
  const std::array<std::uint8_t, 4> prefix = {0x00, 0x10, 0x00, 0x00};  // A 4 KiB frame.
  ASSERT_EQ(::send(socket.get(), prefix.data(), prefix.size(), MSG_NOSIGNAL), 4);
  const auto before = open_descriptors();
  for (int i = 0; i < 1000; ++i) {
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
    ASSERT_EQ(::sendmsg(socket.get(), &message, MSG_NOSIGNAL), 1) << i;
  }
  // The server has read them all once it answers a request that follows them.
  auto client = ConnectClient("after");
  ASSERT_NE(client, nullptr);
  EXPECT_OK(client->MapSegment(1, false));
  // The new client's own descriptors (its socket, both ends, and its event loop's) and no
  // more: a server that kept what it was sent would hold 1,000.
  EXPECT_TRUE(Eventually([&] { return open_descriptors() <= before + 16; }))
      << open_descriptors() << " descriptors open, " << before << " before the trickle";
}

TEST_F(SessionServerTest, AcceptOutOfDescriptorsKeepsServingAndAcceptsOnceTheyFree) {
#ifdef HURRAY_SESSION_TESTS_SANITIZED
  GTEST_SKIP() << "UBSan's vptr check opens a pipe to see whether a vtable is readable: in a "
                  "process held at its descriptor limit it reports every virtual call as an "
                  "invalid vptr";
#endif
  UniqueFd served = ConnectRaw();
  const std::uint64_t session_id = OpenRawSession(served.get());
  ASSERT_NE(session_id, 0u);
  // The socket of a client still to connect, made while descriptors are free.
  UniqueFd waiting(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(waiting.valid());
  auto address = UnixSocketAddress(socket_path_);
  ASSERT_OK(address);
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  const rlimit saved = files;
  {
    UniqueFd probe(::open("/dev/null", O_RDONLY | O_CLOEXEC));  // The lowest free descriptor.
    ASSERT_TRUE(probe.valid());
    files.rlim_cur = static_cast<rlim_t>(probe.get());
  }
  // From here this process, the server's accept4 included, gets EMFILE.
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  const int connected =
      ::connect(waiting.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address));
  const int connect_errno = errno;
  const Status hello_sent = SendMessage(waiting.get(), Hello());
  // The open session is still served meanwhile (a reply that needs no descriptor).
  v1::SessionMessage request;
  request.set_request_id(5);
  request.mutable_map_segment()->set_segment_id(99);
  const Status request_sent = SendMessage(served.get(), request);
  auto refused = ReceiveMessage(served.get());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const bool welcomed_early = HasPendingBytes(waiting.get());
  const std::size_t connections_while_short = server_->connection_count();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);

  ASSERT_EQ(connected, 0) << std::strerror(connect_errno);
  ASSERT_OK(hello_sent);
  ASSERT_OK(request_sent);
  ASSERT_OK(refused);
  EXPECT_EQ(refused->request_id(), 5u);
  ASSERT_TRUE(refused->has_error());
  EXPECT_EQ(refused->error().code(), static_cast<std::uint32_t>(StatusCode::kNotFound));
  EXPECT_FALSE(welcomed_early);
  EXPECT_EQ(connections_while_short, 1u);
  // Once descriptors free up, the queued connection is accepted and welcomed.
  auto welcome = ReceiveMessage(waiting.get());
  ASSERT_OK(welcome);
  EXPECT_TRUE(welcome->has_welcome());
  EXPECT_EQ(server_->connection_count(), 2u);
}

// ---- Create ----

class SessionServerCreateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(directory_, TempDir::Create("hurray-session"));
    socket_path_ = directory_->Path("session.sock");
  }

  TestHost host_;
  boost::asio::io_context io_context_;
  std::optional<TempDir> directory_;
  std::string socket_path_;
};

// The path was readied by PrepareSocketPath (tests/ipc/unix_socket_test.cc has its cases):
// Create binds there and leaves a file it did not make alone.
TEST_F(SessionServerCreateTest, RefusesAPathThatNamesAFileAndLeavesItAlone) {
  {
    UniqueFd file(::open(socket_path_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  }
  EXPECT_ERROR(SessionServer::Create(io_context_, socket_path_, host_, 1),
               StatusCode::kAlreadyExists, {"bind", socket_path_});
  struct stat info{};
  ASSERT_EQ(::lstat(socket_path_.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
}

TEST_F(SessionServerCreateTest, SetsTheSocketModeItIsGiven) {
  auto server = SessionServer::Create(io_context_, socket_path_, host_, 1, 0600);
  ASSERT_OK(server);
  struct stat info{};
  ASSERT_EQ(::lstat(socket_path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(SessionServerTest, ProbeSeesADaemonThatHungUpAndItsRequestIsNeverSent) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  EXPECT_TRUE(connection->StillOpen(/*probe=*/true));
  server_->Stop();
  // Without a probe nothing is known yet; the probe sees the hang-up and closes.
  EXPECT_TRUE(connection->StillOpen(/*probe=*/false));
  EXPECT_FALSE(connection->StillOpen(/*probe=*/true));
  EXPECT_FALSE(connection->StillOpen(/*probe=*/false));
  v1::SessionMessage request;
  request.mutable_release()->add_lease_ids(1);
  bool sent = true;
  EXPECT_ERROR(connection->Exchange(request, v1::SessionMessage::kReleaseReply, &sent),
               StatusCode::kUnavailable, {"restarted"});
  EXPECT_FALSE(sent);
}

TEST_F(SessionServerTest, RequestToADaemonThatHungUpIsReportedUnsent) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  server_->Stop();
  v1::SessionMessage request;
  request.mutable_release()->add_lease_ids(1);
  bool sent = true;
  EXPECT_ERROR(connection->Exchange(request, v1::SessionMessage::kReleaseReply, &sent),
               StatusCode::kUnavailable);
  EXPECT_FALSE(sent);
}

// Whether `socket` has something to read within `wait`.
bool ReadableWithin(int socket, std::chrono::milliseconds wait) {
  pollfd watched{.fd = socket, .events = POLLIN, .revents = 0};
  return ::poll(&watched, 1, static_cast<int>(wait.count())) > 0;
}

// A map_segment the test host refuses (NOT_FOUND): an error reply; the session goes on.
v1::SessionMessage MapUnknownSegment(std::uint64_t request_id) {
  v1::SessionMessage message;
  message.set_request_id(request_id);
  message.mutable_map_segment()->set_segment_id(7);
  return message;
}

v1::SessionMessage ReleaseOneWay(std::uint64_t request_id,
                                 std::initializer_list<std::uint64_t> lease_ids) {
  v1::SessionMessage message;
  message.set_request_id(request_id);
  for (const std::uint64_t lease_id : lease_ids) {
    message.mutable_release_one_way()->add_lease_ids(lease_id);
  }
  return message;
}

TEST_F(SessionServerTest, OneWayReleaseIsNotAnsweredAndItsRefusalComesWithTheNextReply) {
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  ASSERT_OK(SendMessage(socket.get(), ReleaseOneWay(7, {1})));
  // Lease 99 is unknown: the others of its request end all the same.
  ASSERT_OK(SendMessage(socket.get(), ReleaseOneWay(8, {2, 99, 3})));
  EXPECT_FALSE(ReadableWithin(socket.get(), std::chrono::milliseconds(200)));
  EXPECT_TRUE(Eventually([&] { return host_.released() == std::set<std::uint64_t>{1, 2, 3}; }));

  v1::SessionMessage sync;
  sync.set_request_id(9);
  sync.mutable_sync();
  ASSERT_OK(SendMessage(socket.get(), sync));
  auto synced = ReceiveMessage(socket.get());
  ASSERT_OK(synced);
  EXPECT_EQ(synced->request_id(), 9u);
  EXPECT_TRUE(synced->has_synced()) << synced->DebugString();
  ASSERT_EQ(synced->release_failures_size(), 1) << synced->DebugString();
  EXPECT_EQ(synced->release_failures(0).request_id(), 8u);
  EXPECT_EQ(synced->release_failures(0).error().code(),
            static_cast<std::uint32_t>(StatusCode::kNotFound));
  EXPECT_EQ(synced->release_failures(0).error().message(),
            "lease_id 99 is not a lease of this session");

  // Reported once: the next reply, an error of another request, carries none.
  ASSERT_OK(SendMessage(socket.get(), MapUnknownSegment(10)));
  auto refused = ReceiveMessage(socket.get());
  ASSERT_OK(refused);
  EXPECT_TRUE(refused->has_error());
  EXPECT_EQ(refused->release_failures_size(), 0);
}

TEST_F(SessionServerTest, RefusedReleaseComesWithAnErrorReplyToo) {
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  ASSERT_OK(SendMessage(socket.get(), ReleaseOneWay(3, {42})));
  ASSERT_OK(SendMessage(socket.get(), MapUnknownSegment(4)));
  auto refused = ReceiveMessage(socket.get());
  ASSERT_OK(refused);
  EXPECT_EQ(refused->request_id(), 4u);
  EXPECT_TRUE(refused->has_error());
  ASSERT_EQ(refused->release_failures_size(), 1);
  EXPECT_EQ(refused->release_failures(0).request_id(), 3u);
}

TEST_F(SessionServerTest, SyncReleasesReportsTheFirstRefusalAndHowManyMore) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  EXPECT_OK(connection->SyncReleases());
  v1::ReleaseRequest release;
  release.add_lease_ids(1);
  ASSERT_OK(connection->SendReleaseOneWay(release));
  EXPECT_TRUE(connection->ReleasesUnanswered());
  EXPECT_OK(connection->SyncReleases());
  EXPECT_FALSE(connection->ReleasesUnanswered());
  EXPECT_EQ(host_.released(), std::set<std::uint64_t>{1});

  for (const std::uint64_t stale : {1, 5, 6}) {
    release.set_lease_ids(0, stale);
    ASSERT_OK(connection->SendReleaseOneWay(release));
  }
  // A sync that the Client makes before a gRPC call keeps the refusals for SyncReleases.
  ASSERT_OK(connection->Sync());
  EXPECT_ERROR(connection->SyncReleases(), StatusCode::kNotFound,
               {"lease_id 1 is not a lease of this session", "and 2 more"});
  EXPECT_OK(connection->SyncReleases());
}

// An acquire with a wait, as a session message.
v1::SessionMessage WaitingAcquire(std::string name) {
  v1::SessionMessage request;
  request.mutable_acquire()->set_name(std::move(name));
  request.mutable_acquire()->set_wait_timeout_ms(600000);
  return request;
}

TEST_F(SessionServerTest, WaitingAcquireIsAnsweredWhenPublishedWhileOtherRequestsAreServed) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  EXPECT_TRUE(connection->acquire_waits());
  v1::SessionMessage first = WaitingAcquire("w/first");
  v1::SessionMessage second = WaitingAcquire("w/second");
  auto waiting_first = std::async(std::launch::async, [&] {
    return connection->Exchange(first, v1::SessionMessage::kAcquireReply);
  });
  auto waiting_second = std::async(std::launch::async, [&] {
    return connection->Exchange(second, v1::SessionMessage::kAcquireReply);
  });
  ASSERT_TRUE(host_.WaitForWaiting(2));
  // The same connection goes on meanwhile: replies with descriptors, a sync, a refusal.
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(GrantedSegment granted, connection->MapSegment(1 + i % 2, false));
    EXPECT_TRUE(granted.fd.valid());
  }
  ASSERT_OK(connection->Sync());
  EXPECT_ERROR(connection->MapSegment(7, false), StatusCode::kNotFound);
  EXPECT_EQ(waiting_first.wait_for(seconds(0)), std::future_status::timeout);
  // Published from this thread (not the connection's): the second first.
  host_.PublishNow("w/second");
  ASSERT_OK_AND_ASSIGN(v1::SessionMessage second_reply, waiting_second.get());
  EXPECT_EQ(second_reply.acquire_reply().tensor().name(), "w/second");
  EXPECT_EQ(waiting_first.wait_for(seconds(0)), std::future_status::timeout);
  host_.PublishNow("w/first");
  ASSERT_OK_AND_ASSIGN(v1::SessionMessage first_reply, waiting_first.get());
  EXPECT_EQ(first_reply.acquire_reply().tensor().name(), "w/first");
  EXPECT_NE(first_reply.acquire_reply().lease_id(), second_reply.acquire_reply().lease_id());
  EXPECT_TRUE(connection->StillOpen(/*probe=*/true));
}

TEST_F(SessionServerTest, APublishOfTheSessionAnswersItsOwnWaitAfterThePublishReply) {
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  v1::SessionMessage wait = WaitingAcquire("w/own");
  wait.set_request_id(1);
  ASSERT_OK(SendMessage(socket.get(), wait));
  ASSERT_TRUE(host_.WaitForWaiting(1));
  v1::SessionMessage publish;
  publish.set_request_id(2);
  publish.mutable_publish()->set_name("w/own");
  ASSERT_OK(SendMessage(socket.get(), publish));
  FrameReader reader;
  std::vector<std::uint64_t> order;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, ReceiveMessageWith(reader, socket.get()));
    order.push_back(reply.request_id());
    if (reply.request_id() == 1) {
      EXPECT_EQ(reply.acquire_reply().tensor().name(), "w/own") << reply.DebugString();
    }
    if (reply.request_id() == 2) {
      EXPECT_TRUE(reply.has_publish_reply()) << reply.DebugString();
    }
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{2, 1}));
}

TEST_F(SessionServerTest, AnswersToAClientThatDoesNotReadWaitAndArriveWholeInOrder) {
  // 64 waits answered at once with 64 KiB each (4 MiB: far more than the socket holds),
  // then a sync, while the client reads nothing; then it reads everything.
  UniqueFd socket = ConnectRaw();
  ASSERT_NE(OpenRawSession(socket.get()), 0u);
  constexpr int kWaits = 64;
  constexpr std::size_t kPadding = 64 << 10;
  for (int i = 0; i < kWaits; ++i) {
    v1::SessionMessage wait = WaitingAcquire("w/" + std::to_string(i));
    wait.set_request_id(static_cast<std::uint64_t>(i) + 1);
    ASSERT_OK(SendMessage(socket.get(), wait));
  }
  ASSERT_TRUE(host_.WaitForWaiting(kWaits));
  for (int i = 0; i < kWaits; ++i) host_.PublishNow("w/" + std::to_string(i), kPadding);
  v1::SessionMessage sync;
  sync.set_request_id(kWaits + 1);
  sync.mutable_sync();
  ASSERT_OK(SendMessage(socket.get(), sync));
  FrameReader reader;
  std::vector<std::uint64_t> order;
  for (int i = 0; i <= kWaits; ++i) {
    ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, ReceiveMessageWith(reader, socket.get()));
    order.push_back(reply.request_id());
    if (reply.request_id() <= kWaits) {
      EXPECT_EQ(reply.acquire_reply().tensor().name(),
                "w/" + std::to_string(reply.request_id() - 1));
      EXPECT_EQ(reply.acquire_reply().tensor().pool().size(), kPadding);
    } else {
      EXPECT_TRUE(reply.has_synced()) << reply.DebugString();
    }
  }
  std::vector<std::uint64_t> expected;
  for (std::uint64_t id = 1; id <= kWaits + 1; ++id) expected.push_back(id);
  EXPECT_EQ(order, expected);  // Published in request order, the sync read after them.
  EXPECT_FALSE(HasPendingBytes(socket.get()));
}

TEST_F(SessionServerTest, ThreadsSharingAConnectionEachGetTheirOwnReplies) {
  // Four threads acquire 50 names each, waiting (a publisher thread publishes them in
  // another order, some before they are asked for); four more map segments meanwhile.
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  constexpr int kThreads = 4;
  constexpr int kNames = 50;
  const auto name_of = [](int thread, int index) {
    return "m/" + std::to_string(thread) + "/" + std::to_string(index);
  };
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kNames; ++i) {
        v1::SessionMessage wait = WaitingAcquire(name_of(t, i));
        auto reply = connection->Exchange(wait, v1::SessionMessage::kAcquireReply);
        if (!reply || reply->acquire_reply().tensor().name() != name_of(t, i)) ++wrong;
      }
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const std::uint64_t segment = 1 + (t + i) % 2;
        auto granted = connection->MapSegment(segment, false);
        if (!granted || !granted->fd.valid()) ++wrong;
      }
    });
  }
  std::thread publisher([&] {
    for (int i = kNames - 1; i >= 0; --i) {
      for (int t = 0; t < kThreads; ++t) host_.PublishNow(name_of(t, i));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  publisher.join();
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(host_.waiting(), 0u);
  EXPECT_TRUE(connection->StillOpen(/*probe=*/true));
  EXPECT_OK(connection->Sync());
}

TEST_F(SessionServerTest, ClosingWhileAcquiresWaitEndsThemAndTheSessionOnce) {
  auto connection = ConnectClient();
  ASSERT_NE(connection, nullptr);
  const std::uint64_t session_id = connection->session_id();
  v1::SessionMessage wait = WaitingAcquire("w/closed");
  auto waiting = std::async(std::launch::async, [&] {
    return connection->Exchange(wait, v1::SessionMessage::kAcquireReply);
  });
  ASSERT_TRUE(host_.WaitForWaiting(1));
  server_->Stop();  // The daemon's end goes: the waiting thread hears of it at once.
  EXPECT_ERROR(waiting.get(), StatusCode::kUnavailable);
  EXPECT_EQ(host_.close_count(session_id), 1);
  EXPECT_EQ(host_.waiting(), 0u);
  EXPECT_FALSE(connection->StillOpen(/*probe=*/true));
  host_.PublishNow("w/closed");  // Nothing waits: nothing is answered, nothing breaks.
}

TEST_F(SessionServerCreateTest, RefusesSocketInUse) {
  auto first = SessionServer::Create(io_context_, socket_path_, host_, 1);
  ASSERT_OK(first);
  EXPECT_ERROR(SessionServer::Create(io_context_, socket_path_, host_, 2),
               StatusCode::kAlreadyExists, {"bind", socket_path_});
  EXPECT_OK(ConnectUnixSocket(socket_path_));  // The first one still listens.
}

TEST_F(SessionServerCreateTest, RefusesPathTooLongForUnixSocket) {
  EXPECT_ERROR(
      SessionServer::Create(io_context_, directory_->Path(std::string(120, 's')), host_, 1),
      StatusCode::kInvalidArgument, {"socket_path", "at most 107"});
}

TEST_F(SessionServerCreateTest, StopLeavesAForeignSocketFileAlone) {
  auto server = SessionServer::Create(io_context_, socket_path_, host_, 1);
  ASSERT_OK(server);
  // Someone replaced the file (another daemon took over the path).
  ASSERT_EQ(::unlink(socket_path_.c_str()), 0);
  {
    UniqueFd file(::open(socket_path_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  }
  (*server)->Stop();
  struct stat info{};
  EXPECT_EQ(::lstat(socket_path_.c_str(), &info), 0);
}

}  // namespace
}  // namespace hurray
