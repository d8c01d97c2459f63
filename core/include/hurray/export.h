// HURRAY_CXX_EXPORT marks what the C++ client's shared library, libhurray-client++.so,
// exports: the classes and functions of the installed C++ headers (hurray/client.h,
// hurray/file_transfer.h, hurray/health.h, hurray/inspection.h, hurray/inspection_json.h, the
// format's files (hurray/file_reader.h, hurray/file_writer.h, hurray/file_reads.h) and the
// format headers they include).
// HURRAY_CXX_HIDDEN keeps a private member function of such a class out of it: the library
// exports the public members only, so private ones may change (and name internal types)
// without changing its exports.
// Inline functions are never exported (the project builds with -fvisibility-inlines-hidden);
// a program has its own copy of each.
//
// The project builds with hidden visibility, so nothing else of its code can be exported.
// The mark applies whether or not a shared library is being built: the same objects go into
// the static libraries the project's own programs link, and into libhurray-client++.so.
// Libraries that hold these objects but export only C (libhurray.so, libhurray-client.so)
// keep them local with their version scripts; libhurray-client++.so's own script
// (client/hurray_client++.map) drops what the mark lets through that is not the client's API,
// such as the standard library's templates instantiated on hurray types. A program that
// includes these headers sees the mark on declarations, where it changes nothing.
#pragma once

#if defined(__GNUC__)
#define HURRAY_CXX_EXPORT __attribute__((visibility("default")))
#define HURRAY_CXX_HIDDEN __attribute__((visibility("hidden")))
#else
#define HURRAY_CXX_EXPORT
#define HURRAY_CXX_HIDDEN
#endif
