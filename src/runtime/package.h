// The .anvil package (docs/package_format.md): writing one from the compiler's products, and
// reading one by mmapping the archive so that constants point into the mapping without copies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/symint.h"
#include "core/tensor.h"

namespace anvil::runtime {

/// The newest manifest format_version this runtime reads (and the one write_package writes).
inline constexpr int64_t kPackageFormatVersion = 1;
/// Alignment of weights.bin in the archive and of every constant inside it, in bytes.
inline constexpr uint64_t kWeightsAlignment = 64;

/// A symbol of the manifest and its inclusive range.
struct SymbolSpec {
  std::string name;
  SymRange range;
};

/// A user input or output: name, dtype and sizes (ints or SymInt expressions).
struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes;
  /// Inputs only: the model writes this input (manifest "mutated": true), as the exported
  /// graph does in eager; the caller's tensor holds the new value after a run.
  bool mutated = false;
  /// The sizes in text form ("s77", "256").
  std::vector<std::string> size_strings() const;
};

/// One entry of the constants table; offset and nbytes locate it in weights.bin.
struct ConstantSpec {
  std::string name;
  std::string original_name;
  std::string kind;  // parameter, buffer, constant or folded
  DType dtype = DType::kFloat32;
  Shape sizes;
  Shape strides;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool is_mutable = false;
};

/// A buffer the NaN / Inf check scans after a step (manifest "kernels"[i]."checks").
struct BufferCheck {
  enum class Memory { kInput, kOutput, kConstant, kArena };
  std::string buffer;  // the buffer's name in the program ("buf3", "out0")
  std::string nodes;   // graph nodes whose value it holds, comma-separated
  Memory memory = Memory::kArena;
  int64_t index = 0;  // kInput / kOutput / kConstant: the slot in AnvilRunArgs
  SymInt offset;      // kArena: byte offset in the arena
  SymInt numel;
  std::vector<SymInt> sizes;  // logical sizes (for the index in messages)
  DType dtype = DType::kFloat32;
};

/// One step of the generated run() (manifest "kernels"), for profiles.
struct KernelSpec {
  std::string name;   // "k0", "gemm1", "ext2", "coll0"
  std::string kind;   // loop, gemm, extern
  std::string nodes;  // graph nodes it computes, comma-separated
  SymInt bytes;       // bytes it moves (reads + writes, over the symbols); 0 when unknown
  std::vector<BufferCheck> checks;  // what the NaN / Inf check scans after it
};

/// The parsed manifest.json.
struct Manifest {
  int64_t format_version = kPackageFormatVersion;
  int64_t abi_version = 0;
  std::string anvil_version;
  std::string target;                     // "cpu-x86_64-avx2", "cpu-x86_64-native", ...
  std::vector<std::string> cpu_features;  // optional: ISA features the code needs ("avx2")
  // Where the package runs: "device" ("cpu" when absent, "cuda"), and for CUDA packages the
  // lowest compute capability its code runs on (major * 10 + minor; "cuda_min_capability").
  Device::Type device_type = Device::Type::kCPU;
  int64_t cuda_min_capability = 0;
  std::vector<SymbolSpec> symbols;
  // Symbols known only during a run (aten.item values, nonzero / mask counts), in
  // AnvilRunArgs::run_symbols order. Output sizes may use them; input sizes may not.
  std::vector<std::string> run_time_symbols;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<ConstantSpec> constants;
  std::vector<std::string> externs;  // optional: extern targets the code calls
  // Device packages: no step waits on the host ("graph_capturable") and how many extern steps
  // run their CPU kernel on host copies ("host_steps"): a run can be a CUDA graph when both
  // say so.
  bool graph_capturable = false;
  size_t host_steps = 0;
  std::vector<KernelSpec> kernels;   // optional: the steps of run(), in order
  std::string planned_peak_bytes;    // text (a SymInt expression) or empty
  std::string json;                  // the manifest text as stored

  /// Parses and validates manifest text; `where` names the package in messages. Throws Error
  /// for malformed JSON, missing or mistyped fields, a newer format_version, unknown symbols.
  static Manifest parse(const std::string& text, const std::string& where);
  /// The index of symbol `name`, or -1.
  int symbol_index(const std::string& name) const;
};

/// What the compiler hands to write_package.
struct PackageContents {
  /// manifest.json text. Its constants table lists the constants in the order of `constants`;
  /// offset and nbytes are filled in here, and dtype / sizes / strides when absent.
  std::string manifest_json;
  /// Path of the linked model.so (read here); used when non-empty, else `model_so_bytes`.
  std::string model_so_path;
  std::string model_so_bytes;
  /// Constant values in manifest order (any strides: each is stored contiguous).
  std::vector<Tensor> constants;
  /// Generated sources stored under src/ (name relative to src/, text).
  std::vector<std::pair<std::string, std::string>> sources;
};

/// Writes a package to `path`: manifest.json, model.so, weights.bin (data at a 64-byte aligned
/// file offset, every constant at a 64-byte aligned offset; identical immutable constants are
/// stored once) and src/*. Returns the manifest as written. Throws Error on inconsistent input.
Manifest write_package(const std::string& path, const PackageContents& contents);

/// A package opened for reading: the archive mmapped read-only, the manifest parsed and the
/// entries located. Constants are views into the mapping (read-only memory).
class Package {
 public:
  /// Opens and validates `path` (zip structure, stored entries, manifest, weights alignment and
  /// bounds, CRC of manifest.json and model.so). Corrupt or truncated files raise Error.
  static std::shared_ptr<Package> open(const std::string& path);

  Package(const Package&) = delete;
  Package& operator=(const Package&) = delete;
  ~Package();

  const std::string& path() const { return path_; }
  const Manifest& manifest() const { return manifest_; }
  /// The bytes of model.so inside the mapping.
  std::string_view model_so() const { return model_so_; }
  /// The bytes of weights.bin inside the mapping (empty when the package has no constants).
  std::string_view weights() const { return weights_; }
  /// File offset of weights.bin's data in the archive.
  uint64_t weights_file_offset() const { return weights_file_offset_; }
  /// Constant `i` (manifest order) as a tensor viewing the mapping; keeps the mapping alive.
  /// The memory is read-only: copy before writing.
  Tensor constant(size_t i) const;
  /// Names of the entries under src/ (without the "src/" prefix), and one entry's text.
  std::vector<std::string> source_names() const;
  std::string source(const std::string& name) const;

 private:
  struct Entry {
    std::string name;
    uint64_t data_offset = 0;
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  struct Mapping;
  Package() = default;
  const Entry* find(const std::string& name) const;
  std::string_view bytes(const Entry& e) const;

  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  std::vector<Entry> entries_;
  Manifest manifest_;
  std::string_view model_so_, weights_;
  uint64_t weights_file_offset_ = 0;
};

}  // namespace anvil::runtime
