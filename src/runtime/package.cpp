// Package writing (ZipWriter with aligned stored entries) and reading (mmap + a bounds-checked
// parse of the zip structure, so that weights.bin is used in place).
#include "runtime/package.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/zip_directory.h"
#include "core/zip_reader.h"

namespace anvil::runtime {

namespace {

using Json = nlohmann::json;

/// Alignment of the weights.bin entry's data in the archive: a page, which is a multiple of
/// kWeightsAlignment and lets weights.bin be mapped on its own.
constexpr uint64_t kWeightsEntryAlignment = 4096;

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(str("cannot read ", what), path, "a readable file", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A 64-bit content hash (FNV-1a over 8-byte words) used to find identical constants.
uint64_t content_hash(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
}

/// Every constant's bytes lie inside weights.bin (of `weights_size` bytes) at a 64-byte aligned
/// offset, and no two constants share bytes unless both are immutable and name the same range
/// (write_package stores identical immutable constants once). Throws Error naming the constant.
void check_constant_ranges(const std::vector<ConstantSpec>& constants, uint64_t weights_size,
                           const std::string& path) {
  std::vector<size_t> order;
  for (size_t i = 0; i < constants.size(); ++i) {
    const ConstantSpec& c = constants[i];
    if (c.offset % kWeightsAlignment != 0)
      throw Error("constant is not 64-byte aligned in weights.bin", path + ": " + c.name,
                  "an offset that is a multiple of 64", std::to_string(c.offset));
    if (c.offset > weights_size || c.nbytes > weights_size - c.offset)
      throw Error("constant lies outside weights.bin", path + ": " + c.name,
                  str("offset + nbytes <= ", weights_size), str(c.offset, " + ", c.nbytes));
    if (c.nbytes > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ConstantSpec &x = constants[a], &y = constants[b];
    return x.offset != y.offset   ? x.offset < y.offset
           : x.nbytes != y.nbytes ? x.nbytes < y.nbytes
                                  : a < b;
  });
  // Sorted by offset, a constant overlaps an earlier one exactly when it starts before the
  // furthest end so far; `last` is the constant that reaches that end.
  size_t last = SIZE_MAX;
  for (size_t i : order) {
    const ConstantSpec& c = constants[i];
    if (last != SIZE_MAX) {
      const ConstantSpec& p = constants[last];
      const uint64_t p_end = p.offset + p.nbytes;
      const bool shared =
          c.offset == p.offset && c.nbytes == p.nbytes && !c.is_mutable && !p.is_mutable;
      if (c.offset < p_end && !shared)
        throw Error("constants overlap in weights.bin", path + ": " + c.name,
                    str("bytes of its own (or, for identical immutable constants, the same ",
                        "offset and size), after '", p.name, "' at [", p.offset, ", ", p_end, ")"),
                    str("[", c.offset, ", ", c.offset + c.nbytes, ")"));
      if (c.offset + c.nbytes <= p_end) continue;
    }
    last = i;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------ writing

Manifest write_package(const std::string& path, const PackageContents& contents) {
  const std::string where = "write_package(" + path + ")";
  Json manifest;
  try {
    manifest = Json::parse(contents.manifest_json);
  } catch (const Json::exception& e) {
    throw Error("manifest is not valid JSON", where, "a JSON object", e.what());
  }
  ANVIL_CHECK(manifest.is_object(), where, "manifest is not a JSON object", "an object",
              manifest.type_name());
  if (!manifest.contains("format_version")) manifest["format_version"] = kPackageFormatVersion;
  if (!manifest.contains("constants")) manifest["constants"] = Json::array();
  Json& table = manifest["constants"];
  ANVIL_CHECK(table.is_array() && table.size() == contents.constants.size(), where,
              "manifest constants table does not match the constant values",
              str(contents.constants.size(), " entries"),
              table.is_array() ? std::to_string(table.size()) : std::string(table.type_name()));

  // Lay out weights.bin: each constant contiguous at a 64-byte aligned offset; identical
  // immutable constants share one copy.
  std::string weights;
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>>
      seen;  // hash -> (off, n)
  for (size_t i = 0; i < contents.constants.size(); ++i) {
    const std::string cw = str(where, ": constant ", i);
    Json& entry = table[i];
    ANVIL_CHECK(entry.is_object() && entry.contains("name"), cw, "bad constants entry",
                "an object with a name", entry.dump());
    const Tensor& value = contents.constants[i];
    ANVIL_CHECK(value.defined(), cw, "constant value is undefined", "a tensor", "undefined");
    ANVIL_CHECK(value.device().is_cpu(), cw, "constant value is not on the CPU", "cpu",
                value.device().str());
    const std::string dname = dtype_name(value.dtype());
    if (entry.contains("dtype")) {
      const Json& d = entry["dtype"];
      const DType want =
          d.is_string() ? dtype_from_name(d.get<std::string>()) : dtype_from_code(d.get<int64_t>());
      ANVIL_CHECK(want == value.dtype(), cw, "constant dtype does not match the manifest",
                  dtype_name(want), dname);
    }
    entry["dtype"] = dname;
    if (entry.contains("sizes"))
      ANVIL_CHECK(entry["sizes"].get<Shape>() == value.sizes(), cw,
                  "constant sizes do not match the manifest", entry["sizes"].dump(),
                  shape_str(value.sizes()));
    entry["sizes"] = value.sizes();
    entry["strides"] = Tensor::contiguous_strides(value.sizes());
    const bool is_mutable = entry.value("mutable", false);

    const Tensor c = value.contiguous();
    const uint64_t n = c.nbytes();
    const char* bytes = n ? static_cast<const char*>(c.data_ptr()) : "";
    uint64_t offset = UINT64_MAX;
    const uint64_t h = content_hash(bytes, n);
    if (!is_mutable) {
      for (auto [off, len] : seen[h])
        if (len == n && std::memcmp(weights.data() + off, bytes, n) == 0) offset = off;
    }
    if (offset == UINT64_MAX) {
      weights.resize(
          (weights.size() + kWeightsAlignment - 1) / kWeightsAlignment * kWeightsAlignment, '\0');
      offset = weights.size();
      weights.append(bytes, n);
      if (!is_mutable) seen[h].push_back({offset, n});
    }
    entry["offset"] = offset;
    entry["nbytes"] = n;
  }

  const std::string text = manifest.dump(2);
  Manifest parsed = Manifest::parse(text, where);  // validate what we are about to write

  std::string so = contents.model_so_path.empty() ? contents.model_so_bytes
                                                  : read_file(contents.model_so_path, "model.so");
  ANVIL_CHECK(!so.empty(), where, "no model.so given", "a shared library", "nothing");

  // Write to a temporary name and rename, so readers never see a half-written package.
  const std::string tmp = str(path, ".tmp.", ::getpid());
  try {
    ZipWriter zip(tmp);
    zip.add("manifest.json", text, 1);
    zip.add("model.so", so, kWeightsAlignment);
    const uint64_t woff = zip.add("weights.bin", weights, kWeightsEntryAlignment);
    ANVIL_INTERNAL_ASSERT(woff % kWeightsAlignment == 0, "weights.bin misaligned in the archive");
    for (const auto& [name, source] : contents.sources) zip.add("src/" + name, source, 1);
    zip.finish();
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot move the package into place", path, "a writable path", err);
  }
  return parsed;
}

// ------------------------------------------------------------------------------------ reading

/// The read-only mapping of a whole package file.
struct Package::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, size);
  }
};

Package::~Package() = default;

std::shared_ptr<Package> Package::open(const std::string& path) {
  std::shared_ptr<Package> pkg(new Package());
  pkg->path_ = path;
  const std::string where = "package " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open package", path, "a readable .anvil file", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("package is not a regular file", path, "a .anvil file", "something else");
  }
  const size_t n = static_cast<size_t>(st.st_size);
  if (n < 22) {
    ::close(fd);
    throw Error("package is not a zip archive (too small, truncated?)", path, ">= 22 bytes",
                str(n, " bytes"));
  }
  void* addr = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED)
    throw Error("cannot mmap package", path, "a mappable file", std::strerror(errno));
  pkg->mapping_ = std::make_shared<Mapping>();
  pkg->mapping_->addr = addr;
  pkg->mapping_->size = n;
  auto corrupt = [&](const std::string& what) -> Error {
    return Error("corrupt package: " + what, path, "a .anvil zip archive", "a damaged file");
  };

  // The zip structure, checked (names, sizes, local headers, overlaps) before any entry is used.
  for (ZipRecord& r : read_zip_directory({static_cast<const char*>(addr), n}, path, "package")) {
    if (r.method != 0)
      throw Error("package entry is compressed", path + ": " + r.name,
                  "stored (uncompressed) entries", str("compression method ", r.method));
    Entry e;
    e.name = std::move(r.name);
    e.data_offset = r.data_offset;
    e.size = r.size;
    e.crc = r.crc;
    pkg->entries_.push_back(std::move(e));
  }

  auto checked = [&](const char* name) -> std::string_view {
    const Entry* e = pkg->find(name);
    if (!e) throw Error(str("package has no ", name), path, str("an entry ", name), "none");
    std::string_view b = pkg->bytes(*e);
    if (crc32(b.data(), b.size()) != e->crc) throw corrupt(str(name, " fails its CRC check"));
    return b;
  };
  const std::string_view mtext = checked("manifest.json");
  pkg->manifest_ = Manifest::parse(std::string(mtext), path);
  pkg->model_so_ = checked("model.so");

  const Entry* w = pkg->find("weights.bin");
  if (w) {
    if (w->data_offset % kWeightsAlignment != 0)
      throw Error("weights.bin is not aligned in the archive", path,
                  str("a file offset that is a multiple of ", kWeightsAlignment),
                  std::to_string(w->data_offset));
    pkg->weights_ = pkg->bytes(*w);
    pkg->weights_file_offset_ = w->data_offset;
  } else if (!pkg->manifest_.constants.empty()) {
    throw Error("package has no weights.bin but its manifest lists constants", path,
                "an entry weights.bin", "none");
  }
  check_constant_ranges(pkg->manifest_.constants, pkg->weights_.size(), path);
  return pkg;
}

const Package::Entry* Package::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string_view Package::bytes(const Entry& e) const {
  return {static_cast<const char*>(mapping_->addr) + e.data_offset, static_cast<size_t>(e.size)};
}

Tensor Package::constant(size_t i) const {
  ANVIL_CHECK(i < manifest_.constants.size(), path_, "constant index out of range",
              str("< ", manifest_.constants.size()), std::to_string(i));
  const ConstantSpec& c = manifest_.constants[i];
  void* p = const_cast<char*>(weights_.data()) + c.offset;
  std::shared_ptr<Mapping> keep = mapping_;
  auto storage = Storage::wrap(p, c.nbytes, [keep](void*) {});
  return Tensor(std::move(storage), c.dtype, c.sizes, c.strides, 0);
}

std::vector<std::string> Package::source_names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_)
    if (e.name.rfind("src/", 0) == 0 && e.name.size() > 4) out.push_back(e.name.substr(4));
  return out;
}

std::string Package::source(const std::string& name) const {
  const Entry* e = find("src/" + name);
  ANVIL_CHECK(e != nullptr, path_, "no such source in the package", "src/" + name, "none");
  return std::string(bytes(*e));
}

}  // namespace anvil::runtime
