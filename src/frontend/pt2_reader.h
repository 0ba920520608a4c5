// Reader for the .pt2 archives torch.export.save writes (PyTorch 2.11 to 2.15, schema 8.x).
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace anvil::frontend {

struct LoadOptions {
  /// Read weight and constant files into Graph::constants (false: signature and graph only).
  bool load_weights = true;
};

/// Reads `path` into a Graph: nodes with schemas from the op table, value types with symbolic
/// sizes, symbol ranges, the signature and the weights. Throws Error naming the archive, the
/// entry and the field for malformed input; a graph with ops anvil does not support raises one
/// Error listing every unsupported target with its count.
std::unique_ptr<ir::Graph> load_pt2(const std::string& path, const LoadOptions& options = {});

/// Same, from archive bytes in memory (`name` is used in messages).
std::unique_ptr<ir::Graph> load_pt2_bytes(const std::string& bytes, const std::string& name,
                                          const LoadOptions& options = {});

}  // namespace anvil::frontend
