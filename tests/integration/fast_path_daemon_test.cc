// The daemon's side of the fast path, spoken by hand on the session socket: the directory
// and lease page it grants, what a slot keeps, and what a hostile page cannot do.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hurray/ipc/fast_path_layout.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "testing/shared_mapping.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

using ::hurray::testing::SharedMapping;

constexpr std::uint64_t kStateOffset = offsetof(fast_path::DirectoryHeader, state);

// The word offset of entry `index`'s version_id in the directory.
std::uint64_t EntryVersionOffset(std::uint64_t index) {
  return sizeof(fast_path::DirectoryHeader) + index * sizeof(fast_path::DirectoryEntry) +
         offsetof(fast_path::DirectoryEntry, version_id);
}

class FastPathDaemonTest : public RawGrpcTest {
 protected:
  [[nodiscard]] v1::StatsResponse RawStats() {
    v1::StatsResponse stats;
    EXPECT_TRUE(stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok());
    return stats;
  }

  // Sends `message` with `request_id` and returns the reply, its descriptor in *fd.
  static Result<v1::SessionMessage> Ask(RawSession& session, v1::SessionMessage message,
                                        std::uint64_t request_id, UniqueFd* fd = nullptr) {
    message.set_request_id(request_id);
    HURRAY_RETURN_IF_ERROR(session.Send(message));
    return session.Receive(fd);
  }

  static v1::SessionMessage MapDirectory() {
    v1::SessionMessage message;
    message.mutable_map_directory();
    return message;
  }
  static v1::SessionMessage MapLeasePage() {
    v1::SessionMessage message;
    message.mutable_map_lease_page();
    return message;
  }

  // Acquires the latest version of `name` on `session` and releases the lease at once.
  static v1::AcquireResponse AcquireAndRelease(RawSession& session, const std::string& name) {
    v1::SessionMessage acquire;
    acquire.mutable_acquire()->set_name(name);
    auto reply = Ask(session, acquire, 100);
    EXPECT_OK(reply);
    EXPECT_TRUE(reply->has_acquire_reply()) << reply->DebugString();
    v1::SessionMessage release;
    release.mutable_release()->add_lease_ids(reply->acquire_reply().lease_id());
    auto released = Ask(session, release, 101);
    EXPECT_OK(released);
    EXPECT_TRUE(released->has_release_reply()) << released->DebugString();
    return reply->acquire_reply();
  }

  // The session's lease page, mapped read-write; not valid() on failure.
  static SharedMapping GrantedLeasePage(RawSession& session) {
    UniqueFd fd;
    auto reply = Ask(session, MapLeasePage(), 2, &fd);
    EXPECT_OK(reply);
    EXPECT_TRUE(reply->has_lease_page_granted()) << reply->DebugString();
    EXPECT_EQ(reply->lease_page_granted().size(), fast_path::kLeasePageBytes);
    EXPECT_EQ(reply->lease_page_granted().slot_count(), 64u);
    return SharedMapping::Of(fd.get(), fast_path::kLeasePageBytes, true);
  }
};

TEST_F(FastPathDaemonTest, DirectoryIsGrantedReadOnlyAndShowsTheLatestVersion) {
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "1"}), "version 1\n");
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  UniqueFd fd;
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, Ask(*session, MapDirectory(), 1, &fd));
  ASSERT_TRUE(reply.has_directory_granted()) << reply.DebugString();
  const v1::DirectoryGranted& granted = reply.directory_granted();
  EXPECT_EQ(granted.entry_count(), 65536u);
  EXPECT_EQ(granted.size(), fast_path::DirectoryBytes(granted.entry_count()));
  EXPECT_EQ(granted.layout_version(), fast_path::kLayoutVersion);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  void* writable = ::mmap(nullptr, granted.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  EXPECT_EQ(writable, MAP_FAILED) << "a client mapped the directory writable";
  EXPECT_NE(::ftruncate(fd.get(), 0), 0);
  const SharedMapping directory = SharedMapping::Of(fd.get(), granted.size(), false);
  EXPECT_EQ(directory.ReadWord(0), fast_path::kDirectoryMagic);
  EXPECT_EQ(directory.ReadWord(kStateOffset), fast_path::kServing);

  const v1::AcquireResponse first = AcquireAndRelease(*session, "fp/a");
  ASSERT_NE(first.version_id(), 0u);
  ASSERT_LT(first.directory_entry(), granted.entry_count());
  EXPECT_EQ(directory.ReadWord(EntryVersionOffset(first.directory_entry())), first.version_id());
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "2"}), "version 2\n");
  const v1::AcquireResponse second = AcquireAndRelease(*session, "fp/a");
  EXPECT_EQ(directory.ReadWord(EntryVersionOffset(first.directory_entry())), second.version_id());
  ASSERT_OK(client().Delete("fp/a"));
  EXPECT_EQ(directory.ReadWord(EntryVersionOffset(first.directory_entry())), 0u);
  EXPECT_EQ(RawStats().fast_path_directory_entries_used(), 0u);
}

TEST_F(FastPathDaemonTest, PinnedSlotKeepsSupersededVersionUntilClearedThenPoolEmpties) {
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "1"}), "version 1\n");
  const std::uint64_t one_version = CpuPool().used_bytes;
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  SharedMapping slots = GrantedLeasePage(*session);
  ASSERT_TRUE(slots.valid());
  const v1::AcquireResponse first = AcquireAndRelease(*session, "fp/a");
  slots.WriteWord(5 * 8, first.version_id());
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "2"}), "version 2\n");
  EXPECT_EQ(CpuPool().used_bytes, 2 * one_version);
  v1::StatsResponse stats = RawStats();
  EXPECT_EQ(stats.fast_path_pinned_versions(), 1u);
  EXPECT_EQ(stats.fast_path_pinned_bytes(), one_version);
  EXPECT_EQ(stats.fast_path_lease_pages(), 1u);
  EXPECT_EQ(stats.fast_path_lease_slots(), 64u);
  slots.WriteWord(5 * 8, 0);
  EXPECT_TRUE(Eventually([&] { return CpuPool().used_bytes == one_version; }));
  EXPECT_EQ(RawStats().fast_path_pinned_versions(), 0u);
  ASSERT_OK(client().Delete("fp/a"));
  session.reset();
  ExpectStillServingWithNothingLeaked();
}

TEST_F(FastPathDaemonTest, LeasePageIsSealedAndGrantedOncePerSession) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  UniqueFd fd;
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, Ask(*session, MapLeasePage(), 1, &fd));
  ASSERT_TRUE(reply.has_lease_page_granted()) << reply.DebugString();
  ASSERT_TRUE(fd.valid());
  EXPECT_NE(::ftruncate(fd.get(), 0), 0) << "the page shrank";
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fd.get(), 1 << 20), 0) << "the page grew";
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage again, Ask(*session, MapLeasePage(), 2, &fd));
  ASSERT_TRUE(again.has_error()) << again.DebugString();
  EXPECT_EQ(again.error().code(), static_cast<std::uint32_t>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(RawStats().fast_path_lease_pages(), 1u);
}

TEST_F(FastPathDaemonTest, GarbagePageHarmsNoOtherTensorAndItsPinsGoWithTheSession) {
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "1"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "fp/b", "dense", "2"}), "version 1\n");
  const std::uint64_t two_versions = CpuPool().used_bytes;
  auto hostile = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(hostile.has_value());
  SharedMapping slots = GrantedLeasePage(*hostile);
  ASSERT_TRUE(slots.valid());
  const v1::AcquireResponse a = AcquireAndRelease(*hostile, "fp/a");
  for (std::uint64_t i = 0; i < fast_path::kLeasePageBytes / 8; ++i) {
    slots.WriteWord(i * 8, 0x5eed'0000'0000'0000 + i);
  }
  slots.WriteWord(0, a.version_id());  // The one pin it may hold: a version it could read.
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "3"}), "version 2\n");
  EXPECT_EQ(RunAgent({"produce", "fp/b", "dense", "4"}), "version 2\n");
  // fp/b's version 1 went at once; fp/a's stays for the hostile slot.
  EXPECT_EQ(CpuPool().used_bytes, two_versions + two_versions / 2);
  EXPECT_EQ(RunAgent({"consume", "fp/b", "4"}), "OK dense v2\n");
  EXPECT_EQ(RawStats().fast_path_pinned_versions(), 1u);
  hostile.reset();  // The session ends: its page and pins go.
  EXPECT_TRUE(Eventually([&] { return CpuPool().used_bytes == two_versions; }));
  EXPECT_EQ(RawStats().fast_path_pinned_versions(), 0u);
  ASSERT_OK(client().Delete("fp/a"));
  ASSERT_OK(client().Delete("fp/b"));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(FastPathDaemonTest, KilledDaemonsDirectoryIsMarkedEndedByTheNextOne) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  UniqueFd fd;
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, Ask(*session, MapDirectory(), 1, &fd));
  ASSERT_TRUE(reply.has_directory_granted()) << reply.DebugString();
  const SharedMapping directory =
      SharedMapping::Of(fd.get(), reply.directory_granted().size(), false);
  EXPECT_EQ(directory.ReadWord(kStateOffset), fast_path::kServing);
  ASSERT_NO_FATAL_FAILURE(KillAndRestartDaemon());
  EXPECT_EQ(directory.ReadWord(kStateOffset), fast_path::kEnded);
}

class QuotaFastPathDaemonTest : public FastPathDaemonTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = FastPathDaemonTest::daemon_options();
    options.settings.emplace_back("uid_quota.leases = 70");
    return options;
  }
};

TEST_F(QuotaFastPathDaemonTest, LeasePagePastTheLeaseQuotaIsRefused) {
  auto first = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(GrantedLeasePage(*first).valid());
  auto second = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(second.has_value());
  UniqueFd fd;
  ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, Ask(*second, MapLeasePage(), 1, &fd));
  ASSERT_TRUE(reply.has_error()) << reply.DebugString();
  EXPECT_EQ(reply.error().code(), static_cast<std::uint32_t>(StatusCode::kResourceExhausted));
  EXPECT_NE(reply.error().message().find("leases quota 70"), std::string::npos)
      << reply.error().message();
  EXPECT_FALSE(fd.valid());
}

class FastPathOffDaemonTest : public FastPathDaemonTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = FastPathDaemonTest::daemon_options();
    options.settings.emplace_back("fast_path.enabled = false");
    return options;
  }
};

TEST_F(FastPathOffDaemonTest, NeitherIsGrantedAndAcquiresCarryNoIdentity) {
  EXPECT_EQ(RunAgent({"produce", "fp/a", "dense", "1"}), "version 1\n");
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  for (const v1::SessionMessage& ask : {MapDirectory(), MapLeasePage()}) {
    UniqueFd fd;
    ASSERT_OK_AND_ASSIGN(const v1::SessionMessage reply, Ask(*session, ask, 1, &fd));
    ASSERT_TRUE(reply.has_error()) << reply.DebugString();
    EXPECT_EQ(reply.error().code(), static_cast<std::uint32_t>(StatusCode::kFailedPrecondition));
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_EQ(AcquireAndRelease(*session, "fp/a").version_id(), 0u);
  EXPECT_EQ(RawStats().fast_path_directory_entries(), 0u);
}

}  // namespace
}  // namespace hurray::integration
