// A client that knows nothing of hurray's .proto files — the way grpcurl works — lists the
// daemon's services through gRPC server reflection, rebuilds hurray.v1.Exchange from the
// descriptors the daemon sends, and calls it with dynamic messages.
//
// The reflection requests and responses are encoded and decoded by hand (field numbers of
// grpc.reflection.v1alpha), so not even the reflection protocol's generated code is used;
// every hurray type comes from a DescriptorPool filled only from the daemon's answers.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"

#ifndef HURRAYD_PATH
#error "HURRAYD_PATH must name the hurrayd binary"
#endif

namespace hurray::integration {
namespace {

using google::protobuf::Message;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using ::hurray::testing::DaemonProcess;

constexpr char kReflectionMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// ServerReflectionRequest field numbers.
constexpr int kFileByFilename = 3;
constexpr int kFileContainingSymbol = 4;
constexpr int kListServices = 7;
// ServerReflectionResponse field numbers.
constexpr int kFileDescriptorResponse = 4;
constexpr int kListServicesResponse = 6;
constexpr int kErrorResponse = 7;

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return {&slice, 1};
}

std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// A one-field message: a length-delimited string field.
std::string StringField(int number, const std::string& value) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.WriteTag(static_cast<std::uint32_t>(number << 3 | 2));
  out.WriteVarint32(static_cast<std::uint32_t>(value.size()));
  out.WriteString(value);
  out.Trim();
  return bytes;
}

// Fields of a message, by number.
std::vector<const UnknownField*> Fields(const UnknownFieldSet& set, int number) {
  std::vector<const UnknownField*> fields;
  for (int i = 0; i < set.field_count(); ++i) {
    if (set.field(i).number() == number) fields.push_back(&set.field(i));
  }
  return fields;
}

class ReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start({.binary = HURRAYD_PATH}));
    channel_ =
        grpc::CreateChannel("unix:" + daemon_->socket_path(), grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (daemon_) ::hurray::testing::ExpectStopsCleanly(*daemon_);
  }

  // Opens the stream `path`, sends `request` as its only message (closing the client's
  // side), and reads the first message back. `cancel`: the server would go on streaming
  // (Health/Watch), so the call is cancelled after that message; otherwise the call must end
  // OK. The message's bytes; empty when none came.
  std::string FirstMessageOfStream(const std::string& path, const std::string& request,
                                   bool cancel) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    grpc::CompletionQueue queue;
    auto call = stub.PrepareCall(&context, path, &queue);
    void* tag = nullptr;
    bool ok = false;
    const auto step = [&](std::intptr_t expected) {
      EXPECT_TRUE(queue.Next(&tag, &ok));
      EXPECT_EQ(reinterpret_cast<std::intptr_t>(tag), expected);
      return ok;
    };
    call->StartCall(reinterpret_cast<void*>(1));
    EXPECT_TRUE(step(1)) << path;
    call->Write(ToByteBuffer(request), grpc::WriteOptions().set_last_message(),
                reinterpret_cast<void*>(2));
    EXPECT_TRUE(step(2)) << path;
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(3));
    const bool read = step(3);
    EXPECT_TRUE(read) << path;
    if (cancel) context.TryCancel();
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    step(4);
    if (!cancel) {
      EXPECT_TRUE(status.ok()) << path << ": " << status.error_message();
    }
    return read ? FromByteBuffer(response) : std::string();
  }

  // One reflection exchange on the bidirectional stream: one request, one response.
  std::unique_ptr<UnknownFieldSet> Reflect(const std::string& request) {
    auto fields = std::make_unique<UnknownFieldSet>();
    EXPECT_TRUE(fields->ParseFromString(
        FirstMessageOfStream(kReflectionMethod, request, /*cancel=*/false)));
    EXPECT_TRUE(Fields(*fields, kErrorResponse).empty())
        << "reflection error response to a request of " << request.size() << " bytes";
    return fields;
  }

  std::set<std::string> ListServices() {
    auto response = Reflect(StringField(kListServices, "*"));
    std::set<std::string> names;
    for (const UnknownField* list : Fields(*response, kListServicesResponse)) {
      UnknownFieldSet services;
      services.ParseFromString(list->length_delimited());
      for (const UnknownField* service : Fields(services, 1)) {
        UnknownFieldSet service_fields;
        service_fields.ParseFromString(service->length_delimited());
        for (const UnknownField* name : Fields(service_fields, 1)) {
          names.insert(name->length_delimited());
        }
      }
    }
    return names;
  }

  // Adds the file (and, first, its dependencies) to pool_, asking the daemon for each.
  void AddFile(const std::string& request, const std::string& name_hint) {
    auto response = Reflect(request);
    for (const UnknownField* files : Fields(*response, kFileDescriptorResponse)) {
      UnknownFieldSet protos;
      protos.ParseFromString(files->length_delimited());
      for (const UnknownField* bytes : Fields(protos, 1)) {
        google::protobuf::FileDescriptorProto file;
        ASSERT_TRUE(file.ParseFromString(bytes->length_delimited())) << name_hint;
        if (pool_.FindFileByName(file.name()) != nullptr) continue;
        for (const std::string& dependency : file.dependency()) {
          if (pool_.FindFileByName(dependency) == nullptr) {
            AddFile(StringField(kFileByFilename, dependency), dependency);
          }
        }
        ASSERT_NE(pool_.BuildFile(file), nullptr) << file.name();
      }
    }
  }

  // Empty request and response messages of `method` ("package.Service.Method"), built from
  // pool_ alone; null when pool_ does not know the method.
  std::pair<std::unique_ptr<Message>, std::unique_ptr<Message>> NewMessages(
      const std::string& method) {
    const auto* found = pool_.FindMethodByName(method);
    if (found == nullptr) {
      ADD_FAILURE() << method << " is not in the descriptors the daemon sent";
      return {};
    }
    return {std::unique_ptr<Message>(factory_.GetPrototype(found->input_type())->New()),
            std::unique_ptr<Message>(factory_.GetPrototype(found->output_type())->New())};
  }

  // A unary call of `path` ("/package.Service/Method") with a dynamic request; the reply is
  // parsed into `response`.
  grpc::Status CallUnary(const std::string& path, const Message& request, Message& response) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    grpc::CompletionQueue queue;
    auto call =
        stub.PrepareUnaryCall(&context, path, ToByteBuffer(request.SerializeAsString()), &queue);
    call->StartCall();
    grpc::ByteBuffer reply;
    grpc::Status status;
    call->Finish(&reply, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&tag, &ok) && ok);
    if (status.ok()) {
      EXPECT_TRUE(response.ParseFromString(FromByteBuffer(reply))) << path;
    }
    return status;
  }

  // The name of the enum value in `message`'s field `field`.
  static std::string EnumName(const Message& message, const std::string& field) {
    const auto* descriptor = message.GetDescriptor()->FindFieldByName(field);
    if (descriptor == nullptr) return "<no field " + field + ">";
    return message.GetReflection()->GetEnum(message, descriptor)->name();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  google::protobuf::DescriptorPool pool_;  // Only what the daemon sent.
  google::protobuf::DynamicMessageFactory factory_{&pool_};
};

TEST_F(ReflectionTest, ListsTheServices) {
  const std::set<std::string> services = ListServices();
  EXPECT_TRUE(services.contains("hurray.v1.Exchange"));
  EXPECT_TRUE(services.contains("grpc.health.v1.Health"));
  EXPECT_TRUE(services.contains("grpc.reflection.v1alpha.ServerReflection"));
}

// grpcurl describes a service by asking for the file that holds it: every service the
// daemon lists must come back whole, or grpcurl cannot call it.
TEST_F(ReflectionTest, DescribesEveryListedService) {
  const std::set<std::string> services = ListServices();
  ASSERT_FALSE(services.empty());
  for (const std::string& name : services) {
    AddFile(StringField(kFileContainingSymbol, name), name);
    const auto* service = pool_.FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name << ": reflection did not describe it";
    EXPECT_GT(service->method_count(), 0) << name;
  }
}

// `grpcurl -plaintext -unix SOCK grpc.health.v1.Health/Check`, with nothing but reflection.
TEST_F(ReflectionTest, ChecksHealthWithDynamicMessages) {
  AddFile(StringField(kFileContainingSymbol, "grpc.health.v1.Health"), "grpc.health.v1.Health");
  for (const std::string service : {"", "hurray.v1.Exchange"}) {
    auto [request, response] = NewMessages("grpc.health.v1.Health.Check");
    ASSERT_NE(request, nullptr);
    request->GetReflection()->SetString(
        request.get(), request->GetDescriptor()->FindFieldByName("service"), service);
    const grpc::Status status = CallUnary("/grpc.health.v1.Health/Check", *request, *response);
    ASSERT_TRUE(status.ok()) << "\"" << service << "\": " << status.error_message();
    EXPECT_EQ(EnumName(*response, "status"), "SERVING") << "\"" << service << "\"";
  }
  auto [request, response] = NewMessages("grpc.health.v1.Health.Check");
  request->GetReflection()->SetString(
      request.get(), request->GetDescriptor()->FindFieldByName("service"), "no.such.Service");
  EXPECT_EQ(CallUnary("/grpc.health.v1.Health/Check", *request, *response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// Health/Watch, the streaming probe: its first message is the status now.
TEST_F(ReflectionTest, WatchesHealthWithDynamicMessages) {
  AddFile(StringField(kFileContainingSymbol, "grpc.health.v1.Health"), "grpc.health.v1.Health");
  auto [request, response] = NewMessages("grpc.health.v1.Health.Watch");
  ASSERT_NE(request, nullptr);
  ASSERT_TRUE(response->ParseFromString(FirstMessageOfStream(
      "/grpc.health.v1.Health/Watch", request->SerializeAsString(), /*cancel=*/true)));
  EXPECT_EQ(EnumName(*response, "status"), "SERVING");
}

TEST_F(ReflectionTest, DescribesTheExchangeServiceWithNoProtoFiles) {
  AddFile(StringField(kFileContainingSymbol, "hurray.v1.Exchange"), "hurray.v1.Exchange");
  const auto* service = pool_.FindServiceByName("hurray.v1.Exchange");
  ASSERT_NE(service, nullptr);
  std::set<std::string> methods;
  for (int i = 0; i < service->method_count(); ++i) methods.insert(service->method(i)->name());
  EXPECT_EQ(methods, (std::set<std::string>{"Allocate", "CancelAllocation", "Publish",
                                            "PublishBatch", "Acquire", "BatchAcquire", "Release",
                                            "Delete", "List", "Describe", "Watch", "Stats"}));
  const auto* watch = service->FindMethodByName("Watch");
  EXPECT_TRUE(watch->server_streaming());
  const auto* acquire = service->FindMethodByName("Acquire")->input_type();
  ASSERT_NE(acquire->FindFieldByName("wait_timeout_ms"), nullptr);
  // The descriptor message arrived with its dependency, field for field.
  const auto* descriptor = pool_.FindMessageTypeByName("hurray.v1.TensorDescriptor");
  ASSERT_NE(descriptor, nullptr);
  EXPECT_NE(descriptor->FindFieldByName("buffers"), nullptr);
  EXPECT_NE(pool_.FindEnumTypeByName("hurray.v1.ElementType"), nullptr);
}

TEST_F(ReflectionTest, CallsStatsWithDynamicMessages) {
  AddFile(StringField(kFileContainingSymbol, "hurray.v1.Exchange"), "hurray.v1.Exchange");
  auto [request, response] = NewMessages("hurray.v1.Exchange.Stats");
  ASSERT_NE(request, nullptr);
  const grpc::Status status = CallUnary("/hurray.v1.Exchange/Stats", *request, *response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const auto* reflection = response->GetReflection();
  const auto* pools = response->GetDescriptor()->FindFieldByName("pools");
  ASSERT_EQ(reflection->FieldSize(*response, pools), 1);
  const auto& pool = reflection->GetRepeatedMessage(*response, pools, 0);
  const auto* name = pool.GetDescriptor()->FindFieldByName("name");
  const auto* capacity = pool.GetDescriptor()->FindFieldByName("capacity_bytes");
  EXPECT_EQ(pool.GetReflection()->GetString(pool, name), "cpu");
  EXPECT_EQ(pool.GetReflection()->GetUInt64(pool, capacity), daemon_->pool_capacity_bytes());
}

}  // namespace
}  // namespace hurray::integration
