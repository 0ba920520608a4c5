#include "core/zip_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include <cstring>

#include "core/error.h"
#include "core/zip_directory.h"

namespace anvil {

// ---- reading -------------------------------------------------------------------------------

struct ZipReader::Impl {
  std::string name;
  std::string bytes;  // the archive, for from_bytes (libzip reads it in place)
  zip_t* za = nullptr;
  std::vector<ZipEntry> entries;
  std::map<std::string, size_t> by_name;
  std::vector<ZipRecord> records;  // read_zip_directory's view

  ~Impl() {
    if (za) zip_discard(za);
  }

  std::string where(const std::string& entry) const { return name + ": " + entry; }

  /// Reads libzip's central directory into `entries`, which must match `records` (the checked
  /// directory: read_zip_directory).
  void index() {
    zip_int64_t n = zip_get_num_entries(za, 0);
    ANVIL_CHECK(n >= 0, name, "cannot list zip entries", "a readable central directory",
                zip_strerror(za));
    ANVIL_CHECK(static_cast<uint64_t>(n) == records.size(), name,
                "zip library and directory check disagree on the entry count",
                str(records.size(), " entries"), std::to_string(n));
    entries.reserve(static_cast<size_t>(n));
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(za, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW, &st) != 0)
        throw Error("cannot read zip entry " + std::to_string(i), name, "a valid directory record",
                    zip_strerror(za));
      const zip_uint64_t need =
          ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
      ANVIL_CHECK((st.valid & need) == need && st.name, name,
                  "zip entry " + std::to_string(i) + " lacks its name or sizes",
                  "a complete directory record", "an incomplete one");
      // libzip's view must be the checked directory's (libzip turns a NUL in a name into a
      // space, which read_zip_directory has refused).
      const ZipRecord& r = records[static_cast<size_t>(i)];
      ANVIL_CHECK(r.name == st.name && r.size == st.size && r.compressed_size == st.comp_size,
                  where(r.name), "zip library and directory check disagree on an entry",
                  str(r.name, ", ", r.size, " bytes"), str(st.name, ", ", st.size, " bytes"));
      ZipEntry e;
      e.name = st.name;
      e.size = st.size;
      e.compressed_size = st.comp_size;
      e.stored = st.comp_method == ZIP_CM_STORE;
      e.index = i;
      by_name.emplace(e.name, entries.size());
      entries.push_back(std::move(e));
    }
  }
};

namespace {

/// read_zip_directory, its errors phrased as the reader's ("cannot open zip archive: ...").
std::vector<ZipRecord> checked_directory(std::string_view bytes, const std::string& name) {
  try {
    return read_zip_directory(bytes, name);
  } catch (const Error& e) {
    throw Error("cannot open zip archive: " + e.what_part(), e.where(), e.expected(), e.actual());
  }
}

/// checked_directory over the file at `path`, mapped read-only for the check.
std::vector<ZipRecord> check_file_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open archive", path, "a readable file", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("archive is not a regular file", path, "a zip file", "something else");
  }
  const size_t n = static_cast<size_t>(st.st_size);
  if (n == 0) {
    ::close(fd);
    return checked_directory({}, path);  // throws: too small
  }
  void* addr = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED)
    throw Error("cannot map archive", path, "a mappable file", std::strerror(errno));
  struct Unmap {
    void* addr;
    size_t n;
    ~Unmap() { ::munmap(addr, n); }
  } unmap{addr, n};
  return checked_directory({static_cast<const char*>(addr), n}, path);
}

}  // namespace

ZipReader::ZipReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader& ZipReader::operator=(ZipReader&&) noexcept = default;
ZipReader::~ZipReader() = default;

ZipReader ZipReader::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->name = path;
  impl->records = check_file_directory(path);
  int err = 0;
  impl->za = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!impl->za) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw Error("cannot open zip archive", path, "a valid zip archive", msg);
  }
  impl->index();
  return ZipReader(std::move(impl));
}

ZipReader ZipReader::from_bytes(std::string bytes, const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->name = name;
  impl->bytes = std::move(bytes);
  impl->records = checked_directory(impl->bytes, name);
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(impl->bytes.data(), impl->bytes.size(), 0, &ze);
  if (!src) {
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw Error("cannot open zip archive", name, "a valid zip archive", msg);
  }
  impl->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!impl->za) {
    zip_source_free(src);
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw Error("cannot open zip archive", name, "a valid zip archive", msg);
  }
  zip_error_fini(&ze);
  impl->index();
  return ZipReader(std::move(impl));
}

const std::string& ZipReader::name() const { return impl_->name; }
const std::vector<ZipEntry>& ZipReader::entries() const { return impl_->entries; }

const ZipEntry* ZipReader::find(const std::string& entry_name) const {
  auto it = impl_->by_name.find(entry_name);
  return it == impl_->by_name.end() ? nullptr : &impl_->entries[it->second];
}

const ZipEntry* ZipReader::find_suffix(const std::string& suffix) const {
  const ZipEntry* found = nullptr;
  for (const ZipEntry& e : impl_->entries) {
    const std::string& n = e.name;
    bool match = n == suffix || (n.size() > suffix.size() &&
                                 n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                                 n[n.size() - suffix.size() - 1] == '/');
    if (!match) continue;
    if (found)
      throw Error("several entries end with " + suffix, impl_->name, "exactly one",
                  found->name + " and " + n);
    found = &e;
  }
  return found;
}

std::string ZipReader::read(const std::string& entry_name) const {
  const ZipEntry* e = find(entry_name);
  if (!e)
    throw Error("missing entry", impl_->where(entry_name), "the entry in the archive", "none");
  return read(*e);
}

std::string ZipReader::read(const ZipEntry& entry) const {
  std::string out(static_cast<size_t>(entry.size), '\0');
  read_into(entry, out.data());
  return out;
}

void ZipReader::read_into(const ZipEntry& entry, void* dst) const {
  const std::string where = impl_->where(entry.name);
  zip_file_t* zf = zip_fopen_index(impl_->za, static_cast<zip_uint64_t>(entry.index), 0);
  if (!zf) throw Error("cannot open entry", where, "a readable entry", zip_strerror(impl_->za));
  auto fail = [&](const std::string& what, const std::string& expected, const std::string& actual) {
    zip_fclose(zf);
    throw Error(what, where, expected, actual);
  };
  char* out = static_cast<char*>(dst);
  uint64_t got = 0;
  while (got < entry.size) {
    zip_int64_t n = zip_fread(zf, out + got, entry.size - got);
    if (n < 0) fail("corrupt or truncated entry", "readable data", zip_file_strerror(zf));
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  if (got != entry.size) fail("entry is truncated", str(entry.size, " bytes"), str(got, " bytes"));
  // One more read reaches the end of the entry, where libzip checks the CRC.
  char extra;
  zip_int64_t n = zip_fread(zf, &extra, 1);
  if (n < 0) fail("corrupt entry", "data matching its CRC", zip_file_strerror(zf));
  if (n > 0) fail("entry is longer than declared", str(entry.size, " bytes"), "more");
  int rc = zip_fclose(zf);
  if (rc != 0) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, rc);
    std::string msg = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw Error("corrupt entry", where, "data matching its CRC", msg);
  }
}

// ---- CRC-32 -------------------------------------------------------------------------------

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  // zlib's table-sliced CRC (several bytes per step): archives and packages hold hundreds of MB.
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

// ---- writing ------------------------------------------------------------------------------

namespace {
constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kMax16 = 0xFFFF;
constexpr uint16_t kDosDate = 0x0021;  // 1980-01-01, so archives are reproducible
constexpr uint16_t kFlagUtf8 = 0x0800;
constexpr uint16_t kAlignExtraId = 0xD935;  // the extra field zipalign uses for padding
}  // namespace

ZipWriter::ZipWriter() = default;

ZipWriter::ZipWriter(const std::string& path) : path_(path) {
  file_.open(path, std::ios::binary | std::ios::trunc);
  if (!file_) throw Error("cannot create file", path, "a writable path", std::strerror(errno));
}

ZipWriter::~ZipWriter() = default;

void ZipWriter::write(const void* data, size_t n) {
  if (path_.empty()) {
    bytes_.append(static_cast<const char*>(data), n);
  } else {
    file_.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!file_) throw Error("write failed", path_, str(n, " bytes written"), "an I/O error");
  }
  offset_ += n;
}

void ZipWriter::write_u16(uint16_t v) {
  unsigned char b[2] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8)};
  write(b, 2);
}
void ZipWriter::write_u32(uint32_t v) {
  write_u16(static_cast<uint16_t>(v));
  write_u16(static_cast<uint16_t>(v >> 16));
}
void ZipWriter::write_u64(uint64_t v) {
  write_u32(static_cast<uint32_t>(v));
  write_u32(static_cast<uint32_t>(v >> 32));
}

uint64_t ZipWriter::add(const std::string& name, std::string_view data, uint64_t alignment) {
  return add(name, data.data(), data.size(), alignment);
}

uint64_t ZipWriter::add(const std::string& name, const void* data, uint64_t size,
                        uint64_t alignment) {
  const std::string where = (path_.empty() ? std::string("zip writer") : path_) + ": " + name;
  ANVIL_CHECK(!finished_, where, "entry added after finish()", "an open writer", "a finished one");
  ANVIL_CHECK(!name.empty() && name.size() < kMax16, where, "bad entry name",
              "1 to 65534 characters", str(name.size(), " characters"));
  ANVIL_CHECK(alignment >= 1 && alignment <= 65536 && (alignment & (alignment - 1)) == 0, where,
              "bad alignment", "a power of two up to 65536", std::to_string(alignment));
  check_zip_entry_name(name, path_.empty() ? std::string("zip writer") : path_);
  ANVIL_CHECK(!names_.count(name), where, "duplicate entry", "unique entry names", name);
  names_[name] = records_.size();

  const bool zip64 = size >= kMax32;
  const uint64_t zip64_len = zip64 ? 20 : 0;
  const uint64_t base = offset_ + 30 + name.size() + zip64_len;
  uint64_t pad = (alignment - base % alignment) % alignment;
  while (pad != 0 && pad < 6) pad += alignment;  // an extra field needs at least 6 bytes

  const uint32_t crc = crc32(data, static_cast<size_t>(size));
  records_.push_back({name, crc, size, offset_});
  write_u32(0x04034b50);
  write_u16(zip64 ? 45 : 20);
  write_u16(kFlagUtf8);
  write_u16(0);  // stored
  write_u16(0);  // time
  write_u16(kDosDate);
  write_u32(crc);
  write_u32(zip64 ? kMax32 : static_cast<uint32_t>(size));
  write_u32(zip64 ? kMax32 : static_cast<uint32_t>(size));
  write_u16(static_cast<uint16_t>(name.size()));
  write_u16(static_cast<uint16_t>(zip64_len + pad));
  write(name.data(), name.size());
  if (zip64) {
    write_u16(0x0001);
    write_u16(16);
    write_u64(size);
    write_u64(size);
  }
  if (pad) {
    write_u16(kAlignExtraId);
    write_u16(static_cast<uint16_t>(pad - 4));
    write_u16(static_cast<uint16_t>(alignment));
    std::string zeros(static_cast<size_t>(pad - 6), '\0');
    write(zeros.data(), zeros.size());
  }
  const uint64_t data_offset = offset_;
  if (size) write(data, static_cast<size_t>(size));
  return data_offset;
}

void ZipWriter::finish() {
  if (finished_) return;
  finished_ = true;
  const uint64_t cd_offset = offset_;
  for (const CentralRecord& r : records_) {
    const bool big_size = r.size >= kMax32, big_offset = r.header_offset >= kMax32;
    const uint16_t extra = static_cast<uint16_t>((big_size || big_offset ? 4 : 0) +
                                                 (big_size ? 16 : 0) + (big_offset ? 8 : 0));
    write_u32(0x02014b50);
    write_u16(45);  // made by: spec 4.5, MS-DOS attributes
    write_u16(extra ? 45 : 20);
    write_u16(kFlagUtf8);
    write_u16(0);
    write_u16(0);
    write_u16(kDosDate);
    write_u32(r.crc);
    write_u32(big_size ? kMax32 : static_cast<uint32_t>(r.size));
    write_u32(big_size ? kMax32 : static_cast<uint32_t>(r.size));
    write_u16(static_cast<uint16_t>(r.name.size()));
    write_u16(extra);
    write_u16(0);  // comment
    write_u16(0);  // disk
    write_u16(0);  // internal attributes
    write_u32(0);  // external attributes
    write_u32(big_offset ? kMax32 : static_cast<uint32_t>(r.header_offset));
    write(r.name.data(), r.name.size());
    if (extra) {
      write_u16(0x0001);
      write_u16(static_cast<uint16_t>(extra - 4));
      if (big_size) {
        write_u64(r.size);
        write_u64(r.size);
      }
      if (big_offset) write_u64(r.header_offset);
    }
  }
  const uint64_t cd_size = offset_ - cd_offset;
  const uint64_t count = records_.size();
  const bool zip64 = count >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32;
  if (zip64) {
    const uint64_t eocd64_offset = offset_;
    write_u32(0x06064b50);
    write_u64(44);
    write_u16(45);
    write_u16(45);
    write_u32(0);
    write_u32(0);
    write_u64(count);
    write_u64(count);
    write_u64(cd_size);
    write_u64(cd_offset);
    write_u32(0x07064b50);  // locator
    write_u32(0);
    write_u64(eocd64_offset);
    write_u32(1);
  }
  write_u32(0x06054b50);
  write_u16(0);
  write_u16(0);
  write_u16(zip64 ? kMax16 : static_cast<uint16_t>(count));
  write_u16(zip64 ? kMax16 : static_cast<uint16_t>(count));
  write_u32(zip64 ? kMax32 : static_cast<uint32_t>(cd_size));
  write_u32(zip64 ? kMax32 : static_cast<uint32_t>(cd_offset));
  write_u16(0);
  if (!path_.empty()) {
    file_.close();
    if (!file_) throw Error("cannot finish writing", path_, "a closed file", "an I/O error");
  }
}

std::string ZipWriter::take_bytes() {
  ANVIL_CHECK(path_.empty(), path_, "take_bytes() on a file writer", "a memory writer",
              "a file writer");
  finish();
  return std::move(bytes_);
}

std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& entries) {
  ZipWriter w;
  for (const auto& [name, data] : entries) w.add(name, data);
  return w.take_bytes();
}

void write_zip(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& entries) {
  ZipWriter w(path);
  for (const auto& [name, data] : entries) w.add(name, data);
  w.finish();
}

}  // namespace anvil
