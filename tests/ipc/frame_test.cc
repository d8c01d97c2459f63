// The session socket's framing over a socketpair: SendFrame and FrameReader,
// descriptor passing, end of stream, oversized frames.
#include "hurray/ipc/frame.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/unique_fd.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

std::vector<std::uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

std::vector<std::uint8_t> Header(std::uint32_t length) {
  return {static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
          static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24)};
}

void WriteAll(int fd, const std::vector<std::uint8_t>& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

// Whether `fd` has something to read, or has hung up, right now.
bool Readable(int fd) {
  pollfd entry{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&entry, 1, 0) > 0;
}

// Sends `bytes` as one sendmsg with the descriptors `fds` attached (one SCM_RIGHTS message).
void SendWithDescriptors(int socket, const std::vector<std::uint8_t>& bytes,
                         std::initializer_list<int> fds) {
  iovec buffer{.iov_base = const_cast<std::uint8_t*>(bytes.data()), .iov_len = bytes.size()};
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  msghdr message{};
  message.msg_iov = &buffer;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(header), std::data(fds), fds.size() * sizeof(int));
  ASSERT_EQ(::sendmsg(socket, &message, 0), static_cast<ssize_t>(bytes.size()));
}

class FrameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::array<int, 2> pair{};
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair.data()), 0);
    sender_.Reset(pair[0]);
    receiver_.Reset(pair[1]);
  }

  void MakeNonBlocking(int fd) {
    ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  }

  UniqueFd sender_;
  UniqueFd receiver_;
  FrameReader reader_;  // Reads receiver_.
};

TEST_F(FrameTest, RoundTripsPayload) {
  const auto payload = Bytes("a session message");
  ASSERT_OK(SendFrame(sender_.get(), payload));
  auto frame = reader_.Next(receiver_.get());
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, payload);
  EXPECT_FALSE(frame->fd.valid());
}

TEST_F(FrameTest, WritesLittleEndianLengthPrefix) {
  ASSERT_OK(SendFrame(sender_.get(), Bytes("abc")));
  std::array<std::uint8_t, 7> raw{};
  ASSERT_EQ(::read(receiver_.get(), raw.data(), raw.size()), 7);
  EXPECT_EQ(raw, (std::array<std::uint8_t, 7>{3, 0, 0, 0, 'a', 'b', 'c'}));
}

TEST_F(FrameTest, RoundTripsEmptyPayload) {
  ASSERT_OK(SendFrame(sender_.get(), {}));
  auto frame = reader_.Next(receiver_.get());
  ASSERT_OK(frame);
  EXPECT_TRUE(frame->payload.empty());
}

TEST_F(FrameTest, PassesDescriptorWithFrame) {
  std::array<int, 2> pipe_ends{};
  ASSERT_EQ(::pipe2(pipe_ends.data(), O_CLOEXEC), 0);
  UniqueFd read_end(pipe_ends[0]);
  UniqueFd write_end(pipe_ends[1]);

  ASSERT_OK(SendFrame(sender_.get(), Bytes("granted"), write_end.get()));
  write_end.Reset();  // The receiver's copy is now the only write end.
  auto frame = reader_.Next(receiver_.get());
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, Bytes("granted"));
  ASSERT_TRUE(frame->fd.valid());
  EXPECT_NE(::fcntl(frame->fd.get(), F_GETFD) & FD_CLOEXEC, 0);

  ASSERT_EQ(::write(frame->fd.get(), "x", 1), 1);
  char byte = 0;
  ASSERT_EQ(::read(read_end.get(), &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
}

TEST_F(FrameTest, ClosesDescriptorsBeyondTheFirst) {
  std::array<int, 2> pipe_ends{};
  ASSERT_EQ(::pipe2(pipe_ends.data(), O_CLOEXEC), 0);
  UniqueFd read_end(pipe_ends[0]);
  UniqueFd write_end(pipe_ends[1]);

  // A hand-made frame with two copies of the pipe's write end attached.
  std::vector<std::uint8_t> bytes = Header(2);
  bytes.push_back('h');
  bytes.push_back('i');
  SendWithDescriptors(sender_.get(), bytes, {write_end.get(), write_end.get()});
  write_end.Reset();

  {
    auto frame = reader_.Next(receiver_.get());
    ASSERT_OK(frame);
    EXPECT_EQ(frame->payload, Bytes("hi"));
    ASSERT_TRUE(frame->fd.valid());
    EXPECT_FALSE(Readable(read_end.get()));  // A write end is still open: the frame's.
  }
  // The frame's copy is gone; had the second copy leaked, the pipe would not hang up.
  char byte = 0;
  EXPECT_TRUE(Readable(read_end.get()));
  EXPECT_EQ(::read(read_end.get(), &byte, 1), 0);
}

TEST_F(FrameTest, LargestFrameCrossesInPieces) {
  // Larger than the socket buffer: both sides see partial writes and reads.
  std::vector<std::uint8_t> payload(kMaxSessionFrameBytes);
  // NOLINTNEXTLINE(modernize-use-ranges): GCC 12 has no std::ranges::iota.
  std::iota(payload.begin(), payload.end(), std::uint8_t{7});
  Status sent;
  std::thread writer([&] { sent = SendFrame(sender_.get(), payload); });
  auto frame = reader_.Next(receiver_.get());
  writer.join();
  ASSERT_OK(sent);
  ASSERT_OK(frame);
  EXPECT_TRUE(frame->payload == payload);
}

TEST_F(FrameTest, SendFrameWaitsWhenNonBlockingSocketIsFull) {
  MakeNonBlocking(sender_.get());
  std::vector<std::uint8_t> payload(kMaxSessionFrameBytes, 0x5A);
  Status sent;
  std::thread writer([&] { sent = SendFrame(sender_.get(), payload); });
  auto frame = reader_.Next(receiver_.get());
  writer.join();
  ASSERT_OK(sent);
  ASSERT_OK(frame);
  EXPECT_TRUE(frame->payload == payload);
}

TEST_F(FrameTest, ReportsEndOfStream) {
  sender_.Reset();
  EXPECT_ERROR(reader_.Next(receiver_.get()), StatusCode::kUnavailable,
               {"session socket closed by peer"});
}

TEST_F(FrameTest, ReportsEndOfStreamInsideFrame) {
  auto bytes = Header(10);
  bytes.push_back('a');
  WriteAll(sender_.get(), bytes);
  sender_.Reset();
  EXPECT_ERROR(reader_.Next(receiver_.get()), StatusCode::kUnavailable,
               {"session socket closed by peer", "payload: 1 of 10 bytes"});
}

TEST_F(FrameTest, RejectsOversizedLengthPrefix) {
  WriteAll(sender_.get(), Header(kMaxSessionFrameBytes + 1));
  EXPECT_ERROR(reader_.Next(receiver_.get()), StatusCode::kInvalidArgument,
               {"session frame length 1048577", "limit of 1048576"});
}

TEST_F(FrameTest, RejectsLargestPossibleLengthPrefixBeforeAllocating) {
  WriteAll(sender_.get(), Header(0xFFFFFFFF));
  EXPECT_ERROR(reader_.Next(receiver_.get()), StatusCode::kInvalidArgument, {"4294967295"});
}

TEST_F(FrameTest, SendRejectsOversizedPayload) {
  std::vector<std::uint8_t> payload(kMaxSessionFrameBytes + 1);
  EXPECT_ERROR(SendFrame(sender_.get(), payload), StatusCode::kInvalidArgument,
               {"session frame length 1048577"});
  EXPECT_FALSE(Readable(receiver_.get()));  // Nothing was written.
}

TEST_F(FrameTest, SendToClosedPeerFailsWithoutSignal) {
  receiver_.Reset();
  // SIGPIPE would kill the test; MSG_NOSIGNAL turns it into EPIPE.
  EXPECT_ERROR(SendFrame(sender_.get(), Bytes("anyone?")), StatusCode::kUnavailable, {"sendmsg"});
}

TEST_F(FrameTest, ReaderAssemblesFrameArrivingByteByByteThenTakesTheNextOne) {
  auto first = Header(3);
  auto more = Bytes("abc");
  first.insert(first.end(), more.begin(), more.end());
  auto second = Header(2);
  second.push_back('d');
  second.push_back('e');
  std::thread slow([&] {
    for (std::uint8_t byte : first) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      WriteAll(sender_.get(), {byte});
    }
    // The next frame queued right behind the first one.
    WriteAll(sender_.get(), second);
  });
  auto frame = reader_.Next(receiver_.get());
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, Bytes("abc"));
  frame = reader_.Next(receiver_.get());
  slow.join();
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, Bytes("de"));
  EXPECT_FALSE(Readable(receiver_.get()));
}

// ---- FrameReader ----

// A pipe whose write end travels in frames: the read end tells which copy arrived (bytes
// written through it come out here) and whether every copy is closed (it hangs up).
struct TracerPipe {
  TracerPipe() {
    std::array<int, 2> ends{};
    EXPECT_EQ(::pipe2(ends.data(), O_CLOEXEC), 0);
    read_end.Reset(ends[0]);
    write_end.Reset(ends[1]);
  }
  UniqueFd read_end;
  UniqueFd write_end;
};

// Whether `fd` is a write end of `pipe`: a byte written through it comes out of its read end.
bool IsWriteEndOf(int fd, const TracerPipe& pipe) {
  if (::write(fd, "t", 1) != 1) return false;
  char byte = 0;
  return Readable(pipe.read_end.get()) && ::read(pipe.read_end.get(), &byte, 1) == 1 && byte == 't';
}

TEST_F(FrameTest, ReaderReturnsQueuedFramesInOrderEachWithItsDescriptor) {
  TracerPipe first_pipe;
  TracerPipe second_pipe;
  // Five frames queued before the first read: the reader's first recvmsg takes several.
  ASSERT_OK(SendFrame(sender_.get(), Bytes("one")));
  ASSERT_OK(SendFrame(sender_.get(), Bytes("two"), first_pipe.write_end.get()));
  ASSERT_OK(SendFrame(sender_.get(), Bytes("three")));
  ASSERT_OK(SendFrame(sender_.get(), {}));
  ASSERT_OK(SendFrame(sender_.get(), Bytes("five"), second_pipe.write_end.get()));
  first_pipe.write_end.Reset();
  second_pipe.write_end.Reset();

  FrameReader reader;
  std::vector<Frame> frames;
  for (int i = 0; i < 5; ++i) {
    auto frame = reader.Next(receiver_.get());
    ASSERT_OK(frame);
    frames.push_back(std::move(*frame));
  }
  EXPECT_EQ(frames[0].payload, Bytes("one"));
  EXPECT_EQ(frames[1].payload, Bytes("two"));
  EXPECT_EQ(frames[2].payload, Bytes("three"));
  EXPECT_TRUE(frames[3].payload.empty());
  EXPECT_EQ(frames[4].payload, Bytes("five"));
  EXPECT_FALSE(frames[0].fd.valid());
  ASSERT_TRUE(frames[1].fd.valid());
  EXPECT_TRUE(IsWriteEndOf(frames[1].fd.get(), first_pipe));
  EXPECT_FALSE(frames[2].fd.valid());
  EXPECT_FALSE(frames[3].fd.valid());
  ASSERT_TRUE(frames[4].fd.valid());
  EXPECT_TRUE(IsWriteEndOf(frames[4].fd.get(), second_pipe));
  EXPECT_NE(::fcntl(frames[4].fd.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_FALSE(Readable(receiver_.get()));
}

TEST_F(FrameTest, ReaderClosesDescriptorThatNoFrameBeginsWith) {
  TracerPipe pipe;
  // A frame whose second piece, not its first byte, carries the descriptor.
  auto first_piece = Header(4);
  first_piece.push_back('a');
  WriteAll(sender_.get(), first_piece);
  FrameReader reader;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    SendWithDescriptors(sender_.get(), Bytes("bcd"), {pipe.write_end.get()});
  });
  auto frame = reader.Next(receiver_.get());
  late.join();
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, Bytes("abcd"));
  EXPECT_FALSE(frame->fd.valid());
  pipe.write_end.Reset();
  // Had the reader kept the stray copy, the pipe would not hang up.
  char byte = 0;
  EXPECT_TRUE(Readable(pipe.read_end.get()));
  EXPECT_EQ(::read(pipe.read_end.get(), &byte, 1), 0);
}

TEST_F(FrameTest, ReaderTakesLargestFrameInPiecesThenTheNextOne) {
  std::vector<std::uint8_t> payload(kMaxSessionFrameBytes);
  // NOLINTNEXTLINE(modernize-use-ranges): GCC 12 has no std::ranges::iota.
  std::iota(payload.begin(), payload.end(), std::uint8_t{3});
  Status sent;
  std::thread writer([&] {
    sent = SendFrame(sender_.get(), payload);
    if (sent) sent = SendFrame(sender_.get(), Bytes("after"));
  });
  FrameReader reader;
  auto large = reader.Next(receiver_.get());
  auto small = reader.Next(receiver_.get());
  writer.join();
  ASSERT_OK(sent);
  ASSERT_OK(large);
  EXPECT_TRUE(large->payload == payload);
  ASSERT_OK(small);
  EXPECT_EQ(small->payload, Bytes("after"));
}

TEST_F(FrameTest, ReaderWaitsOnNonBlockingSocket) {
  MakeNonBlocking(receiver_.get());
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_OK(SendFrame(sender_.get(), Bytes("late")));
  });
  FrameReader reader;
  auto frame = reader.Next(receiver_.get());
  late.join();
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload, Bytes("late"));
}

TEST_F(FrameTest, ReaderReportsEndOfStreamBetweenAndInsideFrames) {
  ASSERT_OK(SendFrame(sender_.get(), Bytes("last")));
  sender_.Reset();
  FrameReader reader;
  ASSERT_OK(reader.Next(receiver_.get()));
  EXPECT_ERROR(reader.Next(receiver_.get()), StatusCode::kUnavailable,
               {"session socket closed by peer"});

  SetUp();
  auto bytes = Header(10);
  bytes.push_back('a');
  WriteAll(sender_.get(), bytes);
  sender_.Reset();
  FrameReader inside;
  EXPECT_ERROR(inside.Next(receiver_.get()), StatusCode::kUnavailable,
               {"middle of a frame", "payload: 1 of 10 bytes"});

  SetUp();
  WriteAll(sender_.get(), {1, 0});
  sender_.Reset();
  FrameReader in_prefix;
  EXPECT_ERROR(in_prefix.Next(receiver_.get()), StatusCode::kUnavailable,
               {"middle of a frame", "length prefix: 2 of 4 bytes"});
}

TEST_F(FrameTest, ReaderRejectsOversizedLengthPrefix) {
  auto bytes = Header(kMaxSessionFrameBytes + 1);
  bytes.resize(64, 'x');  // Payload bytes behind it, in the same read.
  WriteAll(sender_.get(), bytes);
  FrameReader reader;
  EXPECT_ERROR(reader.Next(receiver_.get()), StatusCode::kInvalidArgument,
               {"session frame length 1048577", "limit of 1048576"});
}

// Descriptors open in this process.
int OpenDescriptorCount() {
  const auto entries = std::filesystem::directory_iterator("/proc/self/fd");
  return static_cast<int>(std::distance(begin(entries), end(entries)));
}

TEST_F(FrameTest, ClosingReaderTakesNoDescriptorHoweverManyATrickleSends) {
  MakeNonBlocking(receiver_.get());
  TracerPipe pipe;
  FrameReader reader(FrameReader::Descriptors::kClose);
  const int before = OpenDescriptorCount();
  // The prefix of a large frame, then one byte per sendmsg, each with a descriptor: every
  // read ends at the next descriptor, so a reader that kept them would hold 2,000.
  WriteAll(sender_.get(), Header(4096));
  for (int i = 0; i < 2000; ++i) {
    SendWithDescriptors(sender_.get(), Bytes("x"), {pipe.write_end.get()});
    if (i % 100 == 99) {
      auto partial = reader.TryNext(receiver_.get());
      ASSERT_OK(partial);
      EXPECT_FALSE(partial->has_value());
      EXPECT_EQ(OpenDescriptorCount(), before);
    }
  }
  WriteAll(sender_.get(), std::vector<std::uint8_t>(4096 - 2000, 'y'));
  auto frame = reader.Next(receiver_.get());
  ASSERT_OK(frame);
  EXPECT_EQ(frame->payload.size(), 4096u);
  EXPECT_FALSE(frame->fd.valid());
  EXPECT_EQ(reader.closed_descriptors(), 2000u);
  EXPECT_EQ(OpenDescriptorCount(), before);
  // Every copy that came is closed: the pipe hangs up once ours goes.
  pipe.write_end.Reset();
  char byte = 0;
  EXPECT_TRUE(Readable(pipe.read_end.get()));
  EXPECT_EQ(::read(pipe.read_end.get(), &byte, 1), 0);
}

TEST_F(FrameTest, AcceptingReaderRefusesMoreDescriptorsThanItKeepsForUnfinishedFrames) {
  MakeNonBlocking(receiver_.get());
  TracerPipe pipe;
  FrameReader reader;
  const int before = OpenDescriptorCount();
  WriteAll(sender_.get(), Header(4096));
  Result<std::optional<Frame>> outcome = std::optional<Frame>();
  for (std::size_t i = 0; i <= FrameReader::kMaxPendingDescriptors && outcome; ++i) {
    SendWithDescriptors(sender_.get(), Bytes("x"), {pipe.write_end.get()});
    outcome = reader.TryNext(receiver_.get());
  }
  EXPECT_ERROR(outcome, StatusCode::kInvalidArgument,
               {"more than 64 descriptors with frames not yet complete"});
  EXPECT_LE(OpenDescriptorCount(), before + static_cast<int>(FrameReader::kMaxPendingDescriptors));
}

TEST_F(FrameTest, ALengthPrefixAloneBuysNoMemory) {
  MakeNonBlocking(receiver_.get());
  FrameReader reader;
  WriteAll(sender_.get(), Header(kMaxSessionFrameBytes));
  WriteAll(sender_.get(), std::vector<std::uint8_t>(100, 'x'));
  auto partial = reader.TryNext(receiver_.get());
  ASSERT_OK(partial);
  EXPECT_FALSE(partial->has_value());
  EXPECT_LE(reader.buffer_bytes(), std::size_t{64} << 10);
  // What grows it is what comes: the whole frame still arrives whole.
  std::vector<std::uint8_t> rest(kMaxSessionFrameBytes - 100, 'z');
  std::thread writer([&] { WriteAll(sender_.get(), rest); });
  auto frame = reader.Next(receiver_.get());
  writer.join();
  ASSERT_OK(frame);
  ASSERT_EQ(frame->payload.size(), kMaxSessionFrameBytes);
  EXPECT_EQ(frame->payload[99], 'x');
  EXPECT_EQ(frame->payload[100], 'z');
}

}  // namespace
}  // namespace hurray
