// ZipReader: read-only access to a zip archive (a file or bytes in memory) through libzip, with
// every entry read checked against its declared size and CRC. ZipWriter: writes archives of
// stored (uncompressed) entries, each entry's data aligned in the file so it can be mmapped.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anvil {

/// One entry of a zip archive as its central directory describes it.
struct ZipEntry {
  std::string name;
  uint64_t size = 0;             // uncompressed size in bytes
  uint64_t compressed_size = 0;  // bytes in the archive
  bool stored = true;            // no compression
  int64_t index = 0;             // libzip index
};

/// A zip archive opened for reading. Errors (not a zip, truncated, corrupt, CRC mismatch, entry
/// missing) raise anvil::Error naming the archive and the entry.
class ZipReader {
 public:
  /// Opens the archive at `path`; `path` names it in messages.
  static ZipReader open(const std::string& path);
  /// Opens an archive held in memory; `name` names it in messages.
  static ZipReader from_bytes(std::string bytes, const std::string& name);

  ZipReader(ZipReader&&) noexcept;
  ZipReader& operator=(ZipReader&&) noexcept;
  ~ZipReader();

  /// The name used in messages (the path, or the name given to from_bytes).
  const std::string& name() const;
  /// Every entry, in archive order.
  const std::vector<ZipEntry>& entries() const;
  /// The entry called exactly `entry_name`, or null.
  const ZipEntry* find(const std::string& entry_name) const;
  /// The one entry whose name is `suffix` or ends with "/" + `suffix`; null when none; throws
  /// Error when several match.
  const ZipEntry* find_suffix(const std::string& suffix) const;
  /// The whole content of entry `entry_name`; throws Error when it is missing or unreadable.
  std::string read(const std::string& entry_name) const;
  /// The whole content of `entry`.
  std::string read(const ZipEntry& entry) const;
  /// Reads the whole of `entry` into `dst` (which holds at least entry.size bytes).
  void read_into(const ZipEntry& entry, void* dst) const;

 private:
  struct Impl;
  explicit ZipReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Writes a zip archive of stored entries to a file or to memory. Each entry's data starts at a
/// multiple of its alignment in the archive (padding goes into the local header's extra field);
/// ZIP64 records are written when sizes or offsets need them.
class ZipWriter {
 public:
  /// A writer that builds the archive in memory (see take_bytes()).
  ZipWriter();
  /// A writer that writes to `path` (created or truncated); throws Error when it cannot.
  explicit ZipWriter(const std::string& path);
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;
  ~ZipWriter();

  /// Appends entry `name` holding `size` bytes at `data`, its data aligned to `alignment`
  /// bytes (a power of two; 1 for none). Returns the offset of the data in the archive.
  uint64_t add(const std::string& name, const void* data, uint64_t size, uint64_t alignment = 64);
  /// Same, for a string of bytes.
  uint64_t add(const std::string& name, std::string_view data, uint64_t alignment = 64);
  /// Writes the central directory and closes the file; further add() calls throw.
  void finish();
  /// finish() and return the archive bytes (memory writers only).
  std::string take_bytes();

 private:
  struct CentralRecord {
    std::string name;
    uint32_t crc;
    uint64_t size;
    uint64_t header_offset;
  };
  void write(const void* data, size_t n);
  void write_u16(uint16_t v);
  void write_u32(uint32_t v);
  void write_u64(uint64_t v);

  std::string path_;  // empty for memory writers
  std::ofstream file_;
  std::string bytes_;
  uint64_t offset_ = 0;
  bool finished_ = false;
  std::vector<CentralRecord> records_;
  std::map<std::string, size_t> names_;
};

/// CRC-32 (the zip / zlib polynomial) of `n` bytes, continuing from `crc`.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

/// An archive of stored entries, as bytes.
std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& entries);
/// Writes an archive of stored entries to `path`.
void write_zip(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace anvil
