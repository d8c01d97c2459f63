// The calling thread's last error: the one message behind hurray_last_error_message. It
// lives in libhurray.so alone; libhurray-client.so reports through hurray_set_last_error.
#include <string>

#include "hurray/c_abi_private.h"

namespace {

thread_local std::string last_error_message;

}  // namespace

extern "C" {

const char* hurray_last_error_message(void) { return last_error_message.c_str(); }

HurrayStatus hurray_set_last_error(HurrayStatus status, const char* message) {
  // Assigning may allocate; if even that fails, keep the status and lose the message.
  try {
    last_error_message.assign(message == nullptr ? "" : message);
  } catch (...) {
    last_error_message.clear();
  }
  return status;
}

}  // extern "C"
