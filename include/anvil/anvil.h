// anvil's public C++ API (the spine): tensors, .npy files, loading a .pt2 export and running it
// with the reference interpreter. The AOT package runtime (runtime::Model) and the C ABI arrive
// with the compiler; see docs/usage.md.
#pragma once

#include "core/dtype.h"        // IWYU pragma: export
#include "core/error.h"        // IWYU pragma: export
#include "core/npy.h"          // IWYU pragma: export
#include "core/symint.h"       // IWYU pragma: export
#include "core/tensor.h"       // IWYU pragma: export
#include "frontend/pt2_reader.h"  // IWYU pragma: export
#include "interp/interpreter.h"   // IWYU pragma: export
#include "ir/graph.h"             // IWYU pragma: export
