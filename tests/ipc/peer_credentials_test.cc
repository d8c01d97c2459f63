// ReadPeerCredentials over a socketpair and on a descriptor that is not a socket.
#include "hurray/ipc/peer_credentials.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

#include "hurray/ipc/unique_fd.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

TEST(PeerCredentialsTest, ReadsPeerCredentials) {
  std::array<int, 2> pair{};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair.data()), 0);
  UniqueFd one(pair[0]);
  UniqueFd other(pair[1]);
  auto credentials = ReadPeerCredentials(other.get());
  ASSERT_OK(credentials);
  EXPECT_EQ(credentials->pid, ::getpid());
  EXPECT_EQ(credentials->uid, ::getuid());
  EXPECT_EQ(credentials->gid, ::getgid());
}

TEST(PeerCredentialsTest, PeerCredentialsOfNonSocketFail) {
  std::array<int, 2> pipe_ends{};
  ASSERT_EQ(::pipe2(pipe_ends.data(), O_CLOEXEC), 0);
  UniqueFd read_end(pipe_ends[0]);
  UniqueFd write_end(pipe_ends[1]);
  EXPECT_ERROR(ReadPeerCredentials(read_end.get()), StatusCode::kInvalidArgument,
               {"getsockopt(SO_PEERCRED)"});
}

}  // namespace
}  // namespace hurray
