// Test helpers: fixture paths, and an editable in-memory copy of a zip archive (read with
// ZipReader, written back with ZipWriter) for building mutated .pt2 archives.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/zip_reader.h"

namespace anvil::test {

/// Path of fixture NAME.pt2.
inline std::string fixture_path(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + name + ".pt2";
}

/// Whole content of a file.
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read test file", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The entries of an archive, editable, in archive order.
struct Archive {
  std::vector<std::pair<std::string, std::string>> entries;

  static Archive from_bytes(const std::string& bytes, const std::string& name = "archive") {
    Archive a;
    ZipReader zip = ZipReader::from_bytes(bytes, name);
    for (const ZipEntry& e : zip.entries()) a.entries.emplace_back(e.name, zip.read(e));
    return a;
  }
  static Archive from_fixture(const std::string& name) {
    return from_bytes(read_file_bytes(fixture_path(name)), name);
  }

  /// Index of the entry whose name ends with `suffix`, or -1.
  int find(const std::string& suffix) const {
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string& n = entries[i].first;
      if (n.size() >= suffix.size() &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        return static_cast<int>(i);
    }
    return -1;
  }
  /// Content of the entry ending with `suffix` (throws when absent).
  std::string& at(const std::string& suffix) {
    int i = find(suffix);
    if (i < 0) throw Error("test archive has no entry", suffix);
    return entries[static_cast<size_t>(i)].second;
  }
  void remove(const std::string& suffix) {
    int i = find(suffix);
    if (i >= 0) entries.erase(entries.begin() + i);
  }
  /// The archive as zip bytes (stored entries).
  std::string bytes() const { return zip_bytes(entries); }
};

}  // namespace anvil::test
