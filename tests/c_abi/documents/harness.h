/*
 * What the programs made from the format documents' C code (extract_c_blocks.py) add around
 * the documents' blocks: checks that print where they failed and exit non-zero, and the
 * tensors the blocks expect to find. Plain C11 with POSIX, like the blocks themselves.
 */
#ifndef HURRAY_TESTS_C_ABI_DOCUMENTS_HARNESS_H_
#define HURRAY_TESTS_C_ABI_DOCUMENTS_HARNESS_H_

/* POSIX 2008 for dup and dup2. NOLINTNEXTLINE(bugprone-reserved-identifier) */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hurray.h"

#define CHECK(condition)                                                                  \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  hurray_last_error_message(): \"%s\"\n", \
              __FILE__, __LINE__, #condition, hurray_last_error_message());               \
      exit(EXIT_FAILURE);                                                                 \
    }                                                                                     \
  } while (0)

#define CHECK_OK(call) CHECK((call) == HURRAY_OK)

/* A dense float32 {2, 3, 4} descriptor (OWNED by the caller). */
static inline HurrayDescriptor* NewDense234(void) {
  const uint64_t dims[] = {2, 3, 4};
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 3, &descriptor));
  return descriptor;
}

/* The encoding of NewDense234's descriptor; free it with hurray_bytes_free. */
static inline uint8_t* EncodeDense234(size_t* len) {
  HurrayDescriptor* descriptor = NewDense234();
  uint8_t* bytes = NULL;
  CHECK_OK(hurray_descriptor_encode(descriptor, &bytes, len));
  CHECK_OK(hurray_descriptor_destroy(descriptor));
  return bytes;
}

/* Standard output, redirected into a temporary file until EndCapture. */
typedef struct {
  FILE* file;
  int saved;
} Capture;

static inline Capture BeginCapture(void) {
  Capture capture = {tmpfile(), -1};
  CHECK(capture.file != NULL);
  CHECK(fflush(stdout) == 0);
  capture.saved = dup(STDOUT_FILENO);
  CHECK(capture.saved >= 0);
  CHECK(dup2(fileno(capture.file), STDOUT_FILENO) >= 0);
  return capture;
}

/* Ends the capture and checks that it holds exactly `expected`. */
static inline void EndCaptureExpecting(Capture capture, const char* expected) {
  CHECK(fflush(stdout) == 0);
  CHECK(dup2(capture.saved, STDOUT_FILENO) >= 0);
  CHECK(close(capture.saved) == 0);
  char printed[256] = {0};
  rewind(capture.file);
  const size_t length = fread(printed, 1, sizeof printed - 1, capture.file);
  CHECK(fclose(capture.file) == 0);
  printf("the document's code printed: \"%.*s\"\n", (int)length, printed);
  CHECK(strcmp(printed, expected) == 0);
}

#endif /* HURRAY_TESTS_C_ABI_DOCUMENTS_HARNESS_H_ */
