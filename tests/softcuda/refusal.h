// softcuda's strictness: every misuse is refused with the error the CUDA documentation names
// and one line on stderr, "softcuda: <call>: <the rule broken>", so that a test log says
// which rule product code broke. Also the environment knobs, read the same way everywhere.
//
// Thread-safe: each line is written with one write(2).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace softcuda {

// Writes "softcuda: <call>: <rule>\n" to stderr and returns `result`.
CUresult Refuse(CUresult result, std::string_view call, std::string_view rule);

// The value of the environment variable `name`, if set.
std::optional<std::string> Environment(const char* name);

// The environment variable `name` as a decimal number; `fallback` when unset. A value that is
// not a number is reported on stderr (a softcuda: line) and `fallback` is used.
std::uint64_t EnvironmentNumber(const char* name, std::uint64_t fallback);

}  // namespace softcuda
