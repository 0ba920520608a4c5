// Fixtures whose weights are too big for the repository (spec/aot.md cases 49 and 83): their
// archives hold zeroed, deflated weight entries, and NAME.weights.json gives each entry's index
// formula (scripts/formula_weights.py):
//   h = (i * 2654435761 + seed * 40503 + 12345) mod 2^32;  v = offset + scale * (h / 2^32 - 0.5)
// computed in float64 and rounded once to the entry's dtype. rebuild_formula_archive() writes
// the real archive, bit for bit the weights PyTorch ran with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::aot_test {

/// A fresh temporary folder, removed with everything in it when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Path of `name` inside the folder.
  std::string operator/(const std::string& name) const;

 private:
  std::string path_;
};

/// Element i of a formula tensor (in float64; round it once to the tensor's dtype).
double formula_value(uint64_t i, int64_t seed, double scale, double offset);

/// A tensor of `sizes` and `dtype` filled by the formula: float32 / float64 round each value
/// once; int64 (token ids) takes floor(value) clamped to [0, scale - 1], so scale = vocab and
/// offset = vocab / 2 give ids in [0, vocab).
Tensor formula_tensor(const Shape& sizes, DType dtype, int64_t seed, double scale, double offset);

/// The dtype a sidecar names ("float32", "float64" or "int64"; float64 when absent).
DType formula_dtype(const std::string& name);

/// Writes FOLDER/NAME.pt2 with every entry listed in FOLDER/NAME.weights.json replaced by its
/// formula bytes to `out_path` (other entries copied); FOLDER defaults to tests/fixtures/aot.
/// Returns the inputs the sidecar describes ("inputs": [{shape, seed, scale, offset, dtype}],
/// or one "input" in float64).
std::vector<Tensor> rebuild_formula_archive(const std::string& name, const std::string& out_path,
                                            const std::string& folder = "");

}  // namespace anvil::aot_test
