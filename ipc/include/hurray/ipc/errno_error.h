// The errno wrapping lives in core (hurray/errno_error.h), which the file readers use too;
// ipc code includes it through this name.
#pragma once

#include "hurray/errno_error.h"  // IWYU pragma: export
