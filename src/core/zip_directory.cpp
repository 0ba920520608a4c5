#include "core/zip_directory.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <unordered_set>

#include "core/error.h"

namespace anvil {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                   kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kMax16 = 0xFFFF;
constexpr size_t kEndLen = 22, kEnd64Len = 56, kLocator64Len = 20, kCentralLen = 46, kLocalLen = 30;
constexpr uint16_t kFlagEncrypted = 0x0001, kFlagDataDescriptor = 0x0008,
                   kFlagStrongEncryption = 0x0040;
constexpr uint16_t kHostUnix = 3, kHostOsx = 19;
constexpr uint32_t kModeTypeMask = 0170000, kModeRegular = 0100000, kModeFolder = 0040000,
                   kModeSymlink = 0120000;

uint16_t rd16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const unsigned char* p) {
  return static_cast<uint64_t>(rd32(p)) | (static_cast<uint64_t>(rd32(p + 4)) << 32);
}

/// `name` with every byte outside printable ASCII written as \xNN, for messages.
std::string printable(std::string_view name) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

/// Replaces the 0xFFFFFFFF fields among `fields` (in order) with the 8-byte values of the
/// ZIP64 extended-information field (id 1) of `extra`; false when that field is too short.
bool apply_zip64(const unsigned char* extra, uint32_t extra_len,
                 std::initializer_list<uint64_t*> fields) {
  for (uint32_t k = 0; k + 4 <= extra_len;) {
    const uint16_t id = rd16(extra + k), len = rd16(extra + k + 2);
    if (k + 4u + len > extra_len) break;
    if (id == 0x0001) {
      uint32_t used = 0;
      for (uint64_t* v : fields) {
        if (*v != kMax32) continue;
        if (used + 8 > len) return false;
        *v = rd64(extra + k + 4 + used);
        used += 8;
      }
      return true;
    }
    k += 4u + len;
  }
  for (uint64_t* v : fields)
    if (*v == kMax32) return false;
  return true;
}

/// "file mode 0NNNNNN" for a Unix mode's type bits.
std::string octal_mode(uint32_t type) {
  std::ostringstream os;
  os << "file mode 0" << std::oct << type;
  return os.str();
}

/// A byte range [begin, end) of the archive that belongs to one entry.
struct Span {
  uint64_t begin, end;
  size_t entry;
};

}  // namespace

std::string zip_entry_name_problem(std::string_view name) {
  if (name.empty()) return "an empty name";
  for (unsigned char c : name) {
    if (c == 0) return "a NUL byte";
    if (c < 0x20 || c == 0x7f) return "a control character";
    if (c == '\\') return "a backslash";
  }
  if (name[0] == '/') return "an absolute path";
  if (name.size() >= 2 && name[1] == ':' && std::isalpha(static_cast<unsigned char>(name[0])))
    return "a drive letter";
  size_t start = 0;
  while (start < name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view part = name.substr(start, end - start);
    if (part == "..") return "a '..' component";
    if (part == ".") return "a '.' component";
    if (part.empty()) return "an empty component";
    start = end + 1;
  }
  return "";
}

void check_zip_entry_name(std::string_view name, const std::string& where) {
  const std::string problem = zip_entry_name_problem(name);
  if (!problem.empty())
    throw Error("unsafe entry name: it has " + problem, where + ": " + printable(name),
                "a relative path inside the archive ('a/b', no '..', '/', '\\' or NUL)",
                "'" + printable(name) + "'");
}

std::vector<ZipRecord> read_zip_directory(std::string_view archive, const std::string& where,
                                          const std::string& kind) {
  const auto* base = reinterpret_cast<const unsigned char*>(archive.data());
  const uint64_t n = archive.size();
  auto corrupt = [&](const std::string& what, const std::string& at = "") {
    return Error(str("corrupt ", kind, ": ", what), at.empty() ? where : where + ": " + at,
                 str("a consistent ", kind), "a damaged or hostile file");
  };
  if (n < kEndLen)
    throw Error(str("not a ", kind, " (too small, truncated?)"), where,
                str(">= ", kEndLen, " bytes"), str(n, " bytes"));

  // End of central directory: the last signature within the final 64 KiB + 22 bytes.
  uint64_t end = UINT64_MAX;
  const uint64_t lowest = n > kEndLen + kMax16 ? n - kEndLen - kMax16 : 0;
  for (uint64_t pos = n - kEndLen + 1; pos-- > lowest;)
    if (rd32(base + pos) == kEndSig) {
      end = pos;
      break;
    }
  if (end == UINT64_MAX)
    throw corrupt("no end-of-central-directory record (not a zip, or truncated)");
  if (end + kEndLen + rd16(base + end + 20) > n)
    throw corrupt("the archive comment runs past the end of the file");
  uint64_t disk = rd16(base + end + 4), cd_disk = rd16(base + end + 6),
           disk_count = rd16(base + end + 8), count = rd16(base + end + 10),
           cd_size = rd32(base + end + 12), cd_off = rd32(base + end + 16);
  uint64_t directory_end = end;  // where the central directory must stop
  if (count == kMax16 || cd_size == kMax32 || cd_off == kMax32) {
    if (end < kLocator64Len || rd32(base + end - kLocator64Len) != kLocator64Sig)
      throw corrupt("missing ZIP64 end-of-central-directory locator");
    const uint64_t e64 = rd64(base + end - kLocator64Len + 8);
    if (e64 > end - kLocator64Len || end - kLocator64Len - e64 < kEnd64Len ||
        rd32(base + e64) != kEnd64Sig)
      throw corrupt("bad ZIP64 end-of-central-directory record");
    disk = rd32(base + e64 + 16);
    cd_disk = rd32(base + e64 + 20);
    disk_count = rd64(base + e64 + 24);
    count = rd64(base + e64 + 32);
    cd_size = rd64(base + e64 + 40);
    cd_off = rd64(base + e64 + 48);
    directory_end = e64;
  }
  if (disk != 0 || cd_disk != 0 || disk_count != count)
    throw Error(str("multi-volume ", kind, "s are not supported"), where, "a single-file archive",
                str("disk ", disk, ", directory on disk ", cd_disk));
  if (cd_off > directory_end || cd_size > directory_end - cd_off)
    throw corrupt(str("central directory (", cd_size, " bytes at ", cd_off,
                      ") lies outside the file's ", directory_end, " bytes before its end record"));
  if (count > cd_size / kCentralLen)
    throw corrupt(str(count, " entries cannot fit a central directory of ", cd_size, " bytes"));

  std::vector<ZipRecord> records;
  records.reserve(static_cast<size_t>(count));
  std::vector<Span> spans;
  spans.reserve(static_cast<size_t>(count));
  std::unordered_set<std::string_view> names;
  uint64_t pos = cd_off;
  const uint64_t cd_end = cd_off + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_end - pos < kCentralLen || rd32(base + pos) != kCentralSig)
      throw corrupt(str("bad central directory record ", i));
    const unsigned char* h = base + pos;
    const uint16_t made_by = rd16(h + 4), flags = rd16(h + 8), method = rd16(h + 10),
                   name_len = rd16(h + 28), extra_len = rd16(h + 30), comment_len = rd16(h + 32);
    const uint32_t external = rd32(h + 38);
    uint64_t csize = rd32(h + 20), usize = rd32(h + 24), lho = rd32(h + 42);
    if (cd_end - pos < uint64_t{kCentralLen} + name_len + extra_len + comment_len)
      throw corrupt(str("central directory record ", i, " overruns the directory"));
    ZipRecord r;
    r.name.assign(reinterpret_cast<const char*>(h + kCentralLen), name_len);
    const std::string at = printable(r.name);
    check_zip_entry_name(r.name, where);
    if (!apply_zip64(h + kCentralLen + name_len, extra_len, {&usize, &csize, &lho}))
      throw corrupt("short or missing ZIP64 extra field", at);
    const uint16_t host = made_by >> 8;
    const uint32_t type = (external >> 16) & kModeTypeMask;
    if ((host == kHostUnix || host == kHostOsx) && type == kModeSymlink)
      throw Error("symlink entries are not allowed", where + ": " + at, "regular files",
                  "a symbolic link");
    if ((host == kHostUnix || host == kHostOsx) && type != 0 && type != kModeRegular &&
        type != kModeFolder)
      throw Error("special file entries are not allowed", where + ": " + at, "regular files",
                  octal_mode(type));
    if (flags & (kFlagEncrypted | kFlagStrongEncryption))
      throw Error("encrypted entries are not supported", where + ": " + at, "plain entries",
                  "an encrypted one");
    if (method == 0) {
      if (csize != usize)
        throw corrupt(
            str("stored entry's sizes disagree (", csize, " bytes stored, ", usize, " declared)"),
            at);
    } else if (method == 8) {
      if (usize / kZipMaxDeflateRatio > csize)
        throw Error("implausible uncompressed size (a zip bomb?)", where + ": " + at,
                    str("at most ", kZipMaxDeflateRatio, " x its ", csize, " compressed bytes"),
                    str(usize, " bytes"));
    } else {
      throw Error("unsupported compression method", where + ": " + at, "stored (0) or deflate (8)",
                  str("method ", method));
    }

    // The local header must agree with the central record.
    if (lho > n || n - lho < kLocalLen || rd32(base + lho) != kLocalSig)
      throw corrupt(str("no local header at offset ", lho), at);
    const unsigned char* l = base + lho;
    const uint16_t l_flags = rd16(l + 6), l_method = rd16(l + 8), l_name_len = rd16(l + 26),
                   l_extra_len = rd16(l + 28);
    const uint32_t l_crc = rd32(l + 14);
    uint64_t l_csize = rd32(l + 18), l_usize = rd32(l + 22);
    if (n - lho - kLocalLen < uint64_t{l_name_len} + l_extra_len)
      throw corrupt("local header runs past the end of the file", at);
    const std::string_view l_name(reinterpret_cast<const char*>(l + kLocalLen), l_name_len);
    if (l_name != r.name)
      throw Error("local header disagrees with the central directory", where + ": " + at,
                  str("name '", at, "'"), str("name '", printable(l_name), "'"));
    if (l_method != method)
      throw Error("local header disagrees with the central directory", where + ": " + at,
                  str("compression method ", method), str("method ", l_method));
    if (!apply_zip64(l + kLocalLen + l_name_len, l_extra_len, {&l_usize, &l_csize}))
      throw corrupt("short or missing ZIP64 extra field in the local header", at);
    // With a data descriptor (flag 3) the local fields may be zero, the values following the data.
    const bool deferred = (l_flags & kFlagDataDescriptor) != 0;
    auto agrees = [&](uint64_t local, uint64_t central) {
      return local == central || (deferred && local == 0);
    };
    if (!agrees(l_crc, rd32(h + 16)) || !agrees(l_csize, csize) || !agrees(l_usize, usize))
      throw Error("local header disagrees with the central directory", where + ": " + at,
                  str("crc ", rd32(h + 16), ", ", csize, " compressed, ", usize, " bytes"),
                  str("crc ", l_crc, ", ", l_csize, " compressed, ", l_usize, " bytes"));
    const uint64_t data = lho + kLocalLen + l_name_len + l_extra_len;
    if (data > cd_off || csize > cd_off - data)
      throw corrupt(str("entry data (", csize, " bytes at ", data,
                        ") runs into the central directory at ", cd_off, " or past the file"),
                    at);
    if (!names.insert(std::string_view(reinterpret_cast<const char*>(h + kCentralLen), name_len))
             .second)
      throw Error("duplicate entry name", where + ": " + at, "unique entry names", at);
    r.method = method;
    r.flags = flags;
    r.crc = rd32(h + 16);
    r.compressed_size = csize;
    r.size = usize;
    r.header_offset = lho;
    r.data_offset = data;
    spans.push_back({lho, data + csize, records.size()});
    records.push_back(std::move(r));
    pos += uint64_t{kCentralLen} + name_len + extra_len + comment_len;
  }

  // Entries may not share bytes: overlapping entries are how a small file claims huge output.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      throw Error(str(kind, " entries overlap"),
                  where + ": " + printable(records[spans[i].entry].name),
                  str("its local header at or after byte ", spans[i - 1].end, ", where '",
                      printable(records[spans[i - 1].entry].name), "' ends"),
                  str("byte ", spans[i].begin));
  return records;
}

}  // namespace anvil
