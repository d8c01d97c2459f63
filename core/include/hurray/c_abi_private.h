/*
 * c_abi_private.h — the plumbing between libhurray.so and the libraries built on it
 * (libhurray-client.so). Not part of hurray.h and never installed: the format's C ABI is
 * hurray.h alone. The symbol lives in its own version node of libhurray.so
 * (HURRAY_PRIVATE, core/hurray.map), apart from the public HURRAY_4.
 */
#ifndef HURRAY_C_ABI_PRIVATE_H_
#define HURRAY_C_ABI_PRIVATE_H_

#include "hurray.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records `message` (BORROWED for the call, copied; null means "") as the calling thread's
 * last error, the one hurray_last_error_message reports, and returns `status`. HURRAY_OK
 * with a null message clears it. Never fails. */
HURRAY_EXPORT HurrayStatus hurray_set_last_error(HurrayStatus status, const char* message);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // HURRAY_C_ABI_PRIVATE_H_
