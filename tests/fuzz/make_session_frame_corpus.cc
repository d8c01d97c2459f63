// Writes the seed corpus of session_frame_fuzzer into the directory given as its one
// argument. Framed seeds (first byte 0: the fuzzer sends a valid hello first, then each
// [2-byte length][SessionMessage] as a frame): allocate, map the segment, publish, acquire,
// release; publish_batch; cancel_allocation; a second hello; a message only the daemon
// sends; bytes that do not parse. Raw seeds (first byte 1: written as they are): a hello
// of the wrong protocol version, a frame longer than the limit, a frame cut short, and a
// request before any hello. The registry of each input is fresh: the session is id 1, the
// first allocation id 2, and so on.
//
// Usage: make_session_frame_corpus tests/fuzz/corpus/session_frame
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "hurray/descriptor_codec.h"
#include "hurray/ipc/session_protocol.h"
#include "hurray/v1/session.pb.h"

namespace hurray::daemon {
namespace {

namespace fs = std::filesystem;

void Save(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  if (!fs::exists(path)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

// The 4-byte little-endian length prefix of a frame of `size` bytes.
std::string FrameHeader(std::uint32_t size) {
  std::string header;
  for (int shift = 0; shift < 32; shift += 8) header.push_back(static_cast<char>(size >> shift));
  return header;
}

// A framed seed: mode byte 0, then each message as [2-byte length][bytes].
class Framed {
 public:
  Framed() : bytes_(1, '\0') {}
  Framed& Message(const v1::SessionMessage& message) { return Bytes(message.SerializeAsString()); }
  Framed& Bytes(const std::string& payload) {
    bytes_.push_back(static_cast<char>(payload.size() & 0xff));
    bytes_.push_back(static_cast<char>((payload.size() >> 8) & 0xff));
    bytes_ += payload;
    return *this;
  }
  [[nodiscard]] const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

v1::SessionMessage Request(std::uint64_t id) {
  v1::SessionMessage message;
  message.set_request_id(id);
  return message;
}

v1::SessionMessage Allocate(std::uint64_t id, std::uint64_t elements) {
  v1::SessionMessage message = Request(id);
  *message.mutable_allocate()->mutable_tensor_descriptor() =
      DescriptorToProto(*TensorDescriptor::Dense(ElementType::kFloat32, {elements}));
  return message;
}

v1::SessionMessage Publish(std::uint64_t id, std::uint64_t allocation, const std::string& name) {
  v1::SessionMessage message = Request(id);
  message.mutable_publish()->set_allocation_id(allocation);
  message.mutable_publish()->set_name(name);
  return message;
}

v1::SessionMessage Hello(std::uint32_t version) {
  v1::SessionMessage message;
  message.mutable_hello()->set_protocol_version(version);
  message.mutable_hello()->set_client_name("seed");
  return message;
}

void WriteFramed(const fs::path& directory) {
  v1::SessionMessage map = Request(2);
  map.mutable_map_segment()->set_segment_id(1);
  map.mutable_map_segment()->set_writable(true);
  v1::SessionMessage acquire = Request(4);
  acquire.mutable_acquire()->set_name("s/a");
  v1::SessionMessage release = Request(5);
  release.mutable_release()->add_lease_ids(3);  // Publish takes no id.
  Save(directory / "allocate_map_publish_acquire_release", Framed()
                                                               .Message(Allocate(1, 1024))
                                                               .Message(map)
                                                               .Message(Publish(3, 2, "s/a"))
                                                               .Message(acquire)
                                                               .Message(release)
                                                               .bytes());

  v1::SessionMessage batch = Request(3);
  for (std::uint64_t allocation : {2, 3}) {
    v1::PublishRequest& item = *batch.mutable_publish_batch()->add_items();
    item.set_allocation_id(allocation);
    item.set_name("s/b" + std::to_string(allocation));
  }
  Save(directory / "publish_batch",
       Framed().Message(Allocate(1, 16)).Message(Allocate(2, 16)).Message(batch).bytes());

  v1::SessionMessage cancel = Request(2);
  cancel.mutable_cancel_allocation()->set_allocation_id(2);
  Save(directory / "cancel_allocation", Framed().Message(Allocate(1, 16)).Message(cancel).bytes());
  Save(directory / "second_hello",
       Framed().Message(Hello(kSessionProtocolVersion)).Message(Allocate(1, 16)).bytes());
  v1::SessionMessage welcome = Request(1);
  welcome.mutable_welcome()->set_session_id(7);
  Save(directory / "daemon_message_from_client", Framed().Message(welcome).bytes());
  Save(directory / "unparsable_frame", Framed().Bytes("\xff\xff\xff").bytes());
}

void WriteRaw(const fs::path& directory) {
  const std::string raw(1, '\1');
  const std::string wrong_version = Hello(kSessionProtocolVersion + 1).SerializeAsString();
  Save(directory / "raw_hello_wrong_version",
       raw + FrameHeader(static_cast<std::uint32_t>(wrong_version.size())) + wrong_version);
  Save(directory / "raw_frame_over_limit", raw + FrameHeader(0xffffffffu) + "x");
  const std::string hello = Hello(kSessionProtocolVersion).SerializeAsString();
  Save(directory / "raw_frame_cut_short",
       raw + FrameHeader(static_cast<std::uint32_t>(hello.size() + 10)) + hello);
  const std::string allocate = Allocate(1, 16).SerializeAsString();
  Save(directory / "raw_request_before_hello",
       raw + FrameHeader(static_cast<std::uint32_t>(allocate.size())) + allocate);
}

}  // namespace
}  // namespace hurray::daemon

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::filesystem::path directory = argv[1];
  std::filesystem::create_directories(directory);
  hurray::daemon::WriteFramed(directory);
  hurray::daemon::WriteRaw(directory);
  std::printf("wrote the session_frame corpus to %s\n", directory.c_str());
  return 0;
}
