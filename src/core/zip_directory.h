// read_zip_directory: a bounds-checked parse of a zip archive's structure (end record, ZIP64
// records, central directory, every entry's local header) from its bytes, which refuses the
// archives a hostile writer makes: entry names that could become paths outside a folder,
// symlink or device entries, sizes the file cannot hold or a compression ratio no real data
// reaches, local headers that disagree with the central directory, and entries that overlap
// (each other or the directory). Used by ZipReader (.pt2) and runtime::Package (.anvil); reads
// nothing outside `archive` and allocates only the records.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace anvil {

/// One entry of a zip archive, as its central directory and local header (which agree) say.
struct ZipRecord {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;   // general purpose bits
  uint32_t crc = 0;
  uint64_t compressed_size = 0;  // bytes of data in the archive
  uint64_t size = 0;             // uncompressed bytes
  uint64_t header_offset = 0;    // the local header
  uint64_t data_offset = 0;      // the first byte of data
};

/// Largest uncompressed / compressed ratio a deflated entry may declare: deflate cannot expand
/// data more than 1032 to 1, so a larger claim is a lie (or a zip bomb's overlapping entries).
inline constexpr uint64_t kZipMaxDeflateRatio = 1032;

/// Parses and checks the structure of the zip archive `archive`; `where` names it in messages
/// and `kind` is the noun they use ("zip archive", "package"). Throws Error naming the archive
/// and, where there is one, the entry.
std::vector<ZipRecord> read_zip_directory(std::string_view archive, const std::string& where,
                                          const std::string& kind = "zip archive");

/// Why `name` is not a safe relative path for a zip entry (empty when it is): empty, a NUL
/// or other control byte, a backslash, an absolute path or drive letter, a "." or ".."
/// component, or an empty component ("a//b"). A trailing "/" (a folder entry) is allowed.
std::string zip_entry_name_problem(std::string_view name);

/// Throws Error (at `where`) unless `name` is a safe relative entry name.
void check_zip_entry_name(std::string_view name, const std::string& where);

}  // namespace anvil
