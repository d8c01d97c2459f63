// hurray_close_alive_agent SESSION_SOCKET BYTES: a producer that ends its session abnormally
// yet lives on. It opens a session by hand on the session socket (the client library would
// cancel its allocation on a clean close), allocates BYTES in the default pool, maps the
// segment read-write and fills the range, prints "allocated SEGMENT_ID OFFSET", closes the
// socket while the allocation is still unpublished, prints "closed", and sleeps, its mapping
// kept, until killed. Exit 1 with a message on stderr when a step fails.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hurray/descriptor_codec.h"
#include "hurray/ipc/frame_reader.h"
#include "hurray/ipc/frame_sender.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/ipc/unix_socket.h"
#include "hurray/v1/session.pb.h"
#include "test_tensors.h"

namespace hurray::integration {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "hurray_close_alive_agent: %s\n", what.c_str());
  std::exit(1);
}

class Session {
 public:
  explicit Session(const std::string& path) {
    auto socket = ConnectUnixSocket(path);
    if (!socket) Fail(socket.error().ToString());
    socket_ = std::move(*socket);
  }

  v1::SessionMessage Call(v1::SessionMessage request, UniqueFd* fd = nullptr) {
    request.set_request_id(++last_request_id_);
    const std::string bytes = request.SerializeAsString();
    if (auto sent = SendFrame(socket_.get(),
                              {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
        !sent) {
      Fail("send: " + sent.error().ToString());
    }
    auto frame = reader_.Next(socket_.get());
    if (!frame) Fail("receive: " + frame.error().ToString());
    v1::SessionMessage reply;
    if (!reply.ParseFromArray(frame->payload.data(), static_cast<int>(frame->payload.size()))) {
      Fail("a reply does not parse");
    }
    if (reply.has_error()) Fail("the daemon refused: " + reply.error().message());
    if (fd != nullptr) *fd = std::move(frame->fd);
    return reply;
  }

  void Close() { socket_.Reset(); }

 private:
  UniqueFd socket_;
  FrameReader reader_;
  std::uint64_t last_request_id_ = 0;
};

int Run(const std::string& path, std::uint64_t bytes) {
  Session session(path);
  v1::SessionMessage hello;
  hello.mutable_hello()->set_protocol_version(kSessionProtocolVersion);
  hello.mutable_hello()->set_client_name("hurray_close_alive_agent");
  (void)session.Call(hello);

  v1::SessionMessage allocate;
  *allocate.mutable_allocate()->mutable_tensor_descriptor() =
      DescriptorToProto(MakeByteTensor(bytes));
  const v1::AllocateResponse allocated = session.Call(allocate).allocate_reply();
  if (allocated.buffers_size() != 1) Fail("the allocation has no single buffer");
  const v1::BufferLocation& buffer = allocated.buffers(0);

  v1::SessionMessage map;
  map.mutable_map_segment()->set_segment_id(buffer.segment_id());
  map.mutable_map_segment()->set_writable(true);
  UniqueFd segment;
  (void)session.Call(map, &segment);
  if (!segment) Fail("segment_granted came without a descriptor");
  void* mapped =
      ::mmap(nullptr, buffer.segment_size(), PROT_READ | PROT_WRITE, MAP_SHARED, segment.get(), 0);
  if (mapped == MAP_FAILED) Fail(std::string("mmap: ") + std::strerror(errno));
  std::memset(static_cast<char*>(mapped) + buffer.offset(), 0x5a, buffer.byte_size());
  std::printf("allocated %llu %llu\n", static_cast<unsigned long long>(buffer.segment_id()),
              static_cast<unsigned long long>(buffer.offset()));
  std::fflush(stdout);

  session.Close();  // The session ends with its allocation unpublished; the mapping stays.
  std::printf("closed\n");
  std::fflush(stdout);
  while (true) ::pause();
}

}  // namespace
}  // namespace hurray::integration

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hurray_close_alive_agent SESSION_SOCKET BYTES\n");
    return 2;
  }
  return hurray::integration::Run(argv[1], std::strtoull(argv[2], nullptr, 10));
}
