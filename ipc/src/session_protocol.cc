#include "hurray/ipc/session_protocol.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace hurray {

std::string SessionBodyName(const google::protobuf::Message& message) {
  const google::protobuf::OneofDescriptor* oneof = message.GetDescriptor()->FindOneofByName("body");
  if (oneof == nullptr) return "no body";
  const auto* body = message.GetReflection()->GetOneofFieldDescriptor(message, oneof);
  return body == nullptr ? "no body" : body->name();
}

}  // namespace hurray
