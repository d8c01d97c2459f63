// SessionConnection: the client's end of the session socket (proto/hurray/v1/session.proto).
// One per process; the connection's life is the session's life.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/frame.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/peer_credentials.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/session.pb.h"

namespace hurray::client {

// An error the daemon sent as a canonical code and its message (a SessionError, a publish's
// NextAllocation) as an Error of that code: UNKNOWN for a code beyond the known ones, and
// INTERNAL for code OK, which is never reported as success.
[[nodiscard]] Error DaemonError(std::uint32_t code, const std::string& message);

// A whole segment, as the daemon granted it: a descriptor on it, or for a legacy CUDA slab
// its IPC handle.
struct GrantedSegment {
  // O_CLOEXEC; read-only unless `writable`. Invalid for SEGMENT_KIND_CUDA_LEGACY_IPC.
  UniqueFd fd;
  std::uint64_t size = 0;  // Bytes of the segment.
  bool writable = false;
  // Bytes of one page of the segment's pool (2 MiB and up: huge pages; for CUDA slabs the
  // device's allocation granularity); 0 when the daemon did not say.
  std::uint64_t page_size = 0;
  v1::SegmentKind kind = v1::SEGMENT_KIND_SHM;
  // CUDA slabs: the GPU's UUID ("GPU-..." or "MIG-...").
  std::string device_uuid;
  // SEGMENT_KIND_CUDA_LEGACY_IPC: the kLegacyIpcHandleBytes of the cudaIpcMemHandle_t. A
  // capability: never logged, never put in an error message.
  std::string legacy_ipc_handle;
};

// The fast path's directory (hurray/ipc/fast_path_layout.h), as the daemon granted it.
struct GrantedDirectory {
  UniqueFd fd;  // O_CLOEXEC, read-only.
  std::uint64_t size = 0;
  std::uint64_t entry_count = 0;
  std::uint32_t layout_version = 0;
};

// This session's lease page (hurray/ipc/fast_path_layout.h), as the daemon granted it.
struct GrantedLeasePage {
  UniqueFd fd;  // O_CLOEXEC, read-write.
  std::uint64_t size = 0;
  std::uint32_t slot_count = 0;
};

// Bytes of a cudaIpcMemHandle_t.
inline constexpr std::size_t kLegacyIpcHandleBytes = 64;

// A connected session: hello sent, welcome received. Destroying it closes the socket,
// which ends the session (the daemon releases its leases and unpublished allocations).
// Once closed (the daemon hung up, stopped or restarted, or the protocol broke) it stays
// closed: a new session needs a new SessionConnection (client_internal::Connection makes it).
// One-way releases (SendReleaseOneWay) get no reply: the daemon serves the session's
// requests in order, so any later reply means they took effect, and it reports the ones it
// refused in `release_failures` of that reply; they are kept here until SyncReleases.
// Thread-safe: several threads may each have a request out at once (an acquire that waits,
// with a daemon that says acquire_waits, is answered whenever the version comes, between the
// other replies): the requests are sent one at a time, and one of the threads that await a
// reply reads the socket for all of them and hands each reply to the thread that awaits its
// request_id. Calls block; nothing times out.
class SessionConnection {
 public:
  // Connects to the daemon's session socket at `socket_path` and opens a session;
  // `client_name` names this process in the daemon's logs (at most 256 bytes).
  // UNAVAILABLE "connect <path>: ...: no daemon listens there" when none does; the daemon's
  // error, with its code, when it refuses the session; UNAVAILABLE when it hangs up.
  [[nodiscard]] static Result<std::unique_ptr<SessionConnection>> Connect(
      const std::string& socket_path, std::string_view client_name);

  SessionConnection(const SessionConnection&) = delete;
  SessionConnection& operator=(const SessionConnection&) = delete;

  // Whether the session still stands: false once the connection is closed. With `probe`,
  // also looks (poll, without blocking) whether the daemon hung up since the last reply,
  // and closes the connection then: the daemon never speaks unasked, so anything readable
  // between requests means its end is gone.
  [[nodiscard]] bool StillOpen(bool probe);

  // Whether the connection is still open as far as this process knows, without locking
  // or probing: false once closed.
  [[nodiscard]] bool open() const { return open_.load(std::memory_order_acquire); }

  // Sent as gRPC metadata `x-hurray-session` on calls made for this session.
  [[nodiscard]] const std::string& token() const { return token_; }
  [[nodiscard]] std::uint64_t session_id() const { return session_id_; }
  // Changes when the daemon restarts.
  [[nodiscard]] std::uint64_t daemon_epoch() const { return daemon_epoch_; }
  // Whether the daemon serves an acquire that waits on this socket (SessionWelcome.acquire_waits).
  [[nodiscard]] bool acquire_waits() const { return acquire_waits_; }
  // This process as the daemon saw it (SO_PEERCRED).
  [[nodiscard]] const PeerCredentials& peer_credentials() const { return credentials_; }
  // A pidfd of the daemon (OpenPeerPidfd), readable once it has exited; null where none
  // could be opened (another pid namespace, an old kernel).
  [[nodiscard]] const std::shared_ptr<const UniqueFd>& daemon_pidfd() const {
    return daemon_pidfd_;
  }
  // The daemon's epoch hold (SessionHello.hold_epoch), or null when it sent none or the
  // session has ended: every mapping of memory this daemon grants keeps it, so that a
  // restarted daemon reuses none of that memory while this process may still read it. The
  // session lets go of its own reference when it ends, so that only the mappings keep it.
  [[nodiscard]] std::shared_ptr<const UniqueFd> epoch_hold() {
    std::lock_guard lock(mutex_);
    return epoch_hold_;
  }

  // A descriptor on segment `segment_id`, read-write when `writable`. The daemon's error
  // with its code (NOT_FOUND, PERMISSION_DENIED, ...) when it refuses; UNAVAILABLE once the
  // connection is gone (the daemon stopped); INTERNAL when the reply breaks the protocol.
  // After a failure of the socket or the protocol the connection is closed (the session
  // has ended) and every later call fails with UNAVAILABLE.
  // A grant of kind SEGMENT_KIND_CUDA_LEGACY_IPC carries a 64-byte handle and no
  // descriptor; every other kind a descriptor (INTERNAL, closing the connection, otherwise).
  [[nodiscard]] Result<GrantedSegment> MapSegment(std::uint64_t segment_id, bool writable);

  // Tells the daemon how this process mapped CUDA slab `segment_id`, or (`unmapped`) that it
  // unmapped it (SlabMapped, answered by SlabMappedAck): for its Stats, and so that it keeps
  // the slab while mapped. The daemon's error with its code when it refuses (a daemon that
  // does not know the message answers with one too; the connection stays usable); the same
  // failures of the connection as MapSegment.
  [[nodiscard]] Status ReportSlabMapped(std::uint64_t segment_id, bool read_only,
                                        bool unmapped = false);

  // The fast path's directory (map_directory, answered by directory_granted) and this
  // session's lease page (map_lease_page, answered by lease_page_granted), each with its
  // descriptor; the sizes are as the daemon said, for the caller to check. The daemon's
  // error with its code when it refuses (FAILED_PRECONDITION: fast path off, or the page
  // was granted already; RESOURCE_EXHAUSTED: the lease quota); a reply without a
  // descriptor is INTERNAL and closes the connection; the same failures of the connection
  // as MapSegment.
  [[nodiscard]] Result<GrantedDirectory> MapDirectory();
  [[nodiscard]] Result<GrantedLeasePage> MapLeasePage();

  // One exchange request on the session socket (allocate, publish, acquire — with a wait only
  // when acquire_waits() —, release, cancel_allocation; its request_id is set here) and its
  // reply, which must have body `reply_case`. The daemon's error with its code when it refuses; the
  // same failures of the connection as MapSegment, and UNAVAILABLE naming the restart when the
  // daemon hung up after the request was sent (whether it took effect is unknown). `*sent`, when
  // given, says whether the whole request reached the socket: when it did not (the
  // connection was closed already, or the daemon had hung up before), the daemon never
  // saw it, and sending it again on a new session is safe.
  // `spin`: when this thread reads the reply, it first polls the socket for that long
  // before it sleeps in recvmsg (AcquireOptions::spin).
  [[nodiscard]] Result<v1::SessionMessage> Exchange(v1::SessionMessage& request,
                                                    v1::SessionMessage::BodyCase reply_case,
                                                    bool* sent = nullptr,
                                                    std::chrono::microseconds spin = {});

  // Sends `release` as a release_one_way and returns once it is in the socket, without
  // waiting for the daemon. The failures of the connection as MapSegment; `*sent` as
  // Exchange says.
  [[nodiscard]] Status SendReleaseOneWay(const v1::ReleaseRequest& release, bool* sent = nullptr);

  // Whether a one-way release was sent and no reply has come since: the daemon may not
  // have served it yet.
  [[nodiscard]] bool ReleasesUnanswered();

  // A sync round trip: once it returns OK, the daemon has served every earlier request.
  // The failures of the connection as MapSegment.
  [[nodiscard]] Status Sync();

  // Sync, then the first one-way release the daemon refused since the last call (its code;
  // the message names the lease, the daemon's reason and how many more were refused), or
  // OK. The failures of the connection as MapSegment.
  [[nodiscard]] Status SyncReleases();

 private:
  SessionConnection(UniqueFd socket, FrameReader reader, std::string token,
                    std::uint64_t session_id, std::uint64_t daemon_epoch, bool acquire_waits,
                    PeerCredentials credentials, UniqueFd epoch_hold, UniqueFd daemon_pidfd);

  // A message the daemon sent, and the descriptor that came with it, if any.
  struct Reply {
    v1::SessionMessage message;
    UniqueFd fd;
  };

  // Reads the next frame into `frame` (its memory reused) and parses it. `context()` names
  // the request in an error; it is called only on the error path.
  template <typename Context>
  [[nodiscard]] static Result<Reply> ReceiveReply(int socket, FrameReader& reader, Frame& frame,
                                                  const Context& context);

  const std::string token_;
  const std::uint64_t session_id_;
  const std::uint64_t daemon_epoch_;
  const bool acquire_waits_;
  const PeerCredentials credentials_;
  const std::shared_ptr<const UniqueFd> daemon_pidfd_;
  std::shared_ptr<const UniqueFd> epoch_hold_;  // Guarded by mutex_.

  // Closes the socket after a failure that leaves the stream unusable; later calls fail
  // with UNAVAILABLE naming `cause`. Returns `cause`.
  Error BreakLocked(Error cause);

  // Sends `request` with a fresh request_id and receives its reply of body `reply_case`,
  // taking the descriptor that came with it into *fd when fd is not null. Errors name the
  // request by `context`, or, when it is empty, by the request's body ("acquire"). `*sent`
  // (when not null) as Exchange says.
  [[nodiscard]] Result<v1::SessionMessage> RoundTripLocked(std::unique_lock<std::mutex>& lock,
                                                           v1::SessionMessage& request,
                                                           v1::SessionMessage::BodyCase reply_case,
                                                           UniqueFd* fd, std::string_view context,
                                                           bool* sent = nullptr,
                                                           std::chrono::microseconds spin = {});
  // The reply to `request_id` (sent, and in awaited_): taken from arrived_ when another
  // thread read it, or read here while no other thread reads (the lock let go meanwhile),
  // keeping the replies it reads for others in arrived_ (polling the socket, until `spin`
  // has passed since the call, before a read that may sleep). A failure of the socket or of the
  // protocol closes the connection.
  template <typename Describe>
  [[nodiscard]] Result<Reply> AwaitReplyLocked(std::unique_lock<std::mutex>& lock,
                                               std::uint64_t request_id, const Describe& describe,
                                               std::chrono::microseconds spin = {});
  // RoundTripLocked for a request whose reply must carry a descriptor, taken into `fd`;
  // INTERNAL naming `what` (closing the connection) when none came.
  [[nodiscard]] Result<v1::SessionMessage> RoundTripWithDescriptorLocked(
      std::unique_lock<std::mutex>& lock, v1::SessionMessage& request,
      v1::SessionMessage::BodyCase reply_case, std::string_view what, UniqueFd& fd);

  // Sends `request` (its request_id set here) as one frame through send_buffer_.
  [[nodiscard]] Status SendLocked(v1::SessionMessage& request);
  // A sync round trip (Sync) under the lock.
  [[nodiscard]] Status SyncLocked(std::unique_lock<std::mutex>& lock);
  // Keeps the release failures a reply reports (the first one and a count of the rest).
  void TakeReleaseFailuresLocked(const v1::SessionMessage& reply);

  std::mutex mutex_;
  // Guarded by mutex_. Invalid once broken (shut down, and closed once no thread reads it).
  UniqueFd socket_;
  std::vector<std::uint8_t> send_buffer_;  // Guarded by mutex_. Reused for every request.
  // A thread reads the socket, the lock let go (reader_ and received_ are its). Guarded by
  // mutex_.
  bool reading_ = false;
  Frame received_;                      // Reused for every reply.
  std::condition_variable replied_;     // A reply arrived, the reader left, or broken_.
  std::vector<std::uint64_t> awaited_;  // Guarded by mutex_. Requests sent, not answered.
  std::vector<Reply> arrived_;          // Guarded by mutex_. Read for a thread still waiting.
  std::uint64_t last_one_way_ = 0;  // Guarded by mutex_. request_id of the last release_one_way.
  std::uint64_t answered_through_ = 0;  // Guarded by mutex_. The highest request_id answered.
  // The first one-way release refused since SyncReleases last returned, and how many more
  // were. Guarded by mutex_.
  std::optional<Error> release_failure_;
  std::uint64_t more_release_failures_ = 0;
  FrameReader reader_;                 // The reading thread's (reading_). Reads socket_'s replies.
  std::optional<Error> broken_;        // Guarded by mutex_. Why the socket was closed.
  std::atomic<bool> open_{true};       // False once broken_ is set.
  std::uint64_t next_request_id_ = 1;  // Guarded by mutex_.
};

}  // namespace hurray::client
