// Helpers of the archive fuzz targets (fuzz_pt2, fuzz_package): an input either is a zip archive
// as it stands (it starts with "PK") or lists the archive's entries in a text form the harness
// zips with correct CRCs and alignment, so that mutations reach the JSON and the graph instead of
// dying at the CRC check:
//
//   === archive/models/model.json
//   {"graph_module": ...}
//   === archive/data/weights/weight_0 <4096
//
// Each entry starts with a line "=== NAME" (optionally " <N": its bytes are padded with zeros to
// N bytes, at most kMaxFill, so large weights need not sit in the corpus); its bytes run to the
// next "\n=== " or the end of the input.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/zip_reader.h"

namespace anvil::fuzz {

/// The largest size an entry may be padded to ("<N"), in bytes.
inline constexpr uint64_t kMaxFill = uint64_t{1} << 20;

/// One entry of a structured input.
struct FuzzEntry {
  std::string name;
  std::string data;
};

/// Whether `input` is in the structured form (else it is used as archive bytes).
inline bool is_structured(std::string_view input) { return input.rfind("=== ", 0) == 0; }

/// The entries of a structured input.
inline std::vector<FuzzEntry> split_entries(std::string_view input) {
  std::vector<FuzzEntry> out;
  size_t pos = 0;
  while (pos < input.size() && input.compare(pos, 4, "=== ") == 0) {
    const size_t line_end = std::min(input.find('\n', pos), input.size());
    std::string header(input.substr(pos + 4, line_end - pos - 4));
    const size_t data_begin = std::min(line_end + 1, input.size());
    size_t next = input.find("\n=== ", data_begin);
    const size_t data_end = next == std::string_view::npos ? input.size() : next;
    FuzzEntry e;
    uint64_t fill = 0;
    const size_t lt = header.rfind(" <");
    if (lt != std::string::npos) {
      fill = std::strtoull(header.c_str() + lt + 2, nullptr, 10);
      header.resize(lt);
    }
    e.name = std::move(header);
    e.data = std::string(input.substr(data_begin, data_end - data_begin));
    if (fill > e.data.size()) e.data.resize(std::min(fill, kMaxFill), '\0');
    out.push_back(std::move(e));
    pos = next == std::string_view::npos ? input.size() : next + 1;
  }
  return out;
}

/// The archive of a structured input (entries in order; `alignment(name)` gives each entry's
/// data alignment), or the input itself when it is not structured.
template <typename Align>
std::string archive_bytes(std::string_view input, Align alignment) {
  if (!is_structured(input)) return std::string(input);
  ZipWriter zip;
  for (const FuzzEntry& e : split_entries(input)) zip.add(e.name, e.data, alignment(e.name));
  return zip.take_bytes();
}

/// Stops the process with `what` on stderr: a broken property the fuzzer reports as a crash.
[[noreturn]] inline void fail_property(const std::string& what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what.c_str());
  std::abort();
}

}  // namespace anvil::fuzz
