// Test helpers that build the zip archives a hostile writer makes, byte by byte: entries with
// any name, Unix file mode, compression method and declared sizes (ZipWriter refuses unsafe
// names), and in-place patches of an archive's records (rename an entry, change a field).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/zip_reader.h"

namespace anvil::test {

/// Writes `v` little-endian in `bytes` bytes at `at` of `z` (appending when `at` is the end).
inline void put_le(std::string& z, size_t at, uint64_t v, int bytes) {
  if (at == z.size()) z.resize(z.size() + static_cast<size_t>(bytes));
  for (int i = 0; i < bytes; ++i) z[at + static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
}
inline uint64_t get_le(const std::string& z, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes; i-- > 0;)
    v = (v << 8) | static_cast<unsigned char>(z[at + static_cast<size_t>(i)]);
  return v;
}

/// One entry of a raw archive. `data` is stored as is (already compressed when method is 8).
struct RawEntry {
  std::string name;
  std::string data;
  uint16_t method = 0;
  uint64_t size = UINT64_MAX;  // declared uncompressed size; UINT64_MAX: data.size()
  uint16_t made_by = 20;       // (host << 8) | version; host 3 = Unix
  uint32_t external = 0;       // external attributes; a Unix mode in the high 16 bits
  int64_t crc = -1;            // CRC-32 of the uncompressed data; -1: that of `data`
};

/// An archive of `entries`, each with a local header, its data and a central record that agree;
/// ZIP64 fields are written for sizes of 2^32 or more.
inline std::string raw_zip(const std::vector<RawEntry>& entries) {
  std::string z;
  std::vector<uint64_t> offsets;
  auto header = [&](const RawEntry& e, bool central, uint64_t lho) {
    const uint64_t usize = e.size == UINT64_MAX ? e.data.size() : e.size;
    const bool big = usize >= 0xFFFFFFFFu;
    put_le(z, z.size(), central ? 0x02014b50 : 0x04034b50, 4);
    if (central) put_le(z, z.size(), e.made_by, 2);
    put_le(z, z.size(), big ? 45 : 20, 2);
    put_le(z, z.size(), 0, 2);  // flags
    put_le(z, z.size(), e.method, 2);
    put_le(z, z.size(), 0, 4);  // time, date
    put_le(z, z.size(),
           e.crc >= 0 ? static_cast<uint64_t>(e.crc) : crc32(e.data.data(), e.data.size()), 4);
    put_le(z, z.size(), big ? 0xFFFFFFFFu : e.data.size(), 4);
    put_le(z, z.size(), big ? 0xFFFFFFFFu : usize, 4);
    put_le(z, z.size(), e.name.size(), 2);
    put_le(z, z.size(), big ? 20 : 0, 2);
    if (central) {
      put_le(z, z.size(), 0, 2);  // comment
      put_le(z, z.size(), 0, 4);  // disk, internal attributes
      put_le(z, z.size(), e.external, 4);
      put_le(z, z.size(), lho, 4);
    }
    z += e.name;
    if (big) {
      put_le(z, z.size(), 1, 2);
      put_le(z, z.size(), 16, 2);
      put_le(z, z.size(), usize, 8);
      put_le(z, z.size(), e.data.size(), 8);
    }
  };
  for (const RawEntry& e : entries) {
    offsets.push_back(z.size());
    header(e, false, 0);
    z += e.data;
  }
  const uint64_t cd = z.size();
  for (size_t i = 0; i < entries.size(); ++i) header(entries[i], true, offsets[i]);
  put_le(z, z.size(), 0x06054b50, 4);
  put_le(z, z.size(), 0, 4);
  put_le(z, z.size(), entries.size(), 2);
  put_le(z, z.size(), entries.size(), 2);
  put_le(z, z.size(), z.size() - 12 - cd, 4);  // directory size (the 12 bytes just written)
  put_le(z, z.size(), cd, 4);
  put_le(z, z.size(), 0, 2);
  return z;
}

/// Offset of the central record of entry `index` (archives without ZIP64 end records).
inline size_t central_record(const std::string& z, size_t index) {
  const size_t end = z.rfind(std::string("PK\x05\x06", 4));
  if (end == std::string::npos) throw std::runtime_error("test archive has no end record");
  size_t pos = static_cast<size_t>(get_le(z, end + 16, 4));
  for (size_t i = 0; i < index; ++i)
    pos += 46 + get_le(z, pos + 28, 2) + get_le(z, pos + 30, 2) + get_le(z, pos + 32, 2);
  return pos;
}
/// Offset of the local header of entry `index`.
inline size_t local_header(const std::string& z, size_t index) {
  return static_cast<size_t>(get_le(z, central_record(z, index) + 42, 4));
}

/// Renames entry `index` in its central record and local header to `to` (of the same length).
inline void rename_entry(std::string& z, size_t index, const std::string& to) {
  const size_t c = central_record(z, index), l = local_header(z, index);
  if (get_le(z, c + 28, 2) != to.size()) throw std::runtime_error("rename needs the same length");
  z.replace(c + 46, to.size(), to);
  z.replace(l + 30, to.size(), to);
}

}  // namespace anvil::test
