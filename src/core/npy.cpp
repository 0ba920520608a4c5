#include "core/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace anvil {
namespace {

static_assert(std::endian::native == std::endian::little,
              "anvil's .npy reader and writer assume a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kArrayAlign = 64;           // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS

/// One row of the descr table: the descr without its byte-order character, and the dtype.
struct NpyType {
  const char* code;
  DType dtype;
};

constexpr NpyType kNpyTypes[] = {
    {"b1", DType::kBool},    {"u1", DType::kUInt8},     {"i1", DType::kInt8},
    {"i2", DType::kInt16},   {"u2", DType::kUInt16},    {"i4", DType::kInt32},
    {"i8", DType::kInt64},   {"f2", DType::kFloat16},   {"f4", DType::kFloat32},
    {"f8", DType::kFloat64}, {"c8", DType::kComplex64}, {"c16", DType::kComplex128},
};

constexpr const char* kSupportedDescrs =
    "one of b1 u1 i1 i2 u2 i4 i8 f2 f4 f8 c8 c16 with byte order <, | or =";

/// Printable form of up to `n` raw bytes, for error messages: "\x93NUMPY" style.
std::string printable(const std::string& bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < std::min(n, bytes.size()); ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return "\"" + out + "\"";
}

/// `s` cut to at most 200 characters, for error messages.
std::string clip(const std::string& s) { return s.size() > 200 ? s.substr(0, 200) + "..." : s; }

/// The parsed header dictionary of a .npy file.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

/// Recursive-descent parser for the Python dict literal in a .npy header, e.g.
/// "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 256), }".
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{', "the header dictionary to start with '{'");
    while (true) {
      skip();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      std::string key = string_literal("a quoted key");
      expect(':', "':' after key '" + key + "'");
      skip();
      if (key == "descr") {
        if (peek() == '[')
          fail("structured (record) dtypes are not supported", "a simple descr such as '<f4'",
               excerpt());
        h.descr = string_literal("a quoted descr such as '<f4'");
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = bool_literal();
        have_order = true;
      } else if (key == "shape") {
        h.shape = int_tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the .npy header", "only descr, fortran_order, shape",
             key);
      }
      skip();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "',' or '}' after the value of '" + key + "'");
      break;
    }
    while (pos_ < s_.size() &&
           (std::isspace(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == 0))
      ++pos_;
    if (pos_ != s_.size())
      fail("unexpected text after the header dictionary", "only padding", excerpt());
    const char* missing = !have_descr   ? "descr"
                          : !have_order ? "fortran_order"
                          : !have_shape ? "shape"
                                        : nullptr;
    if (missing)
      fail(std::string("the .npy header has no '") + missing + "' key",
           "keys descr, fortran_order and shape", str("header ", printable(s_, 200)));
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& expected,
                         const std::string& actual) {
    throw Error(what, name_, expected, actual);
  }
  std::string excerpt() const {
    return str(printable(s_.substr(pos_), 40), " at header offset ", pos_);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c, const std::string& what) {
    skip();
    if (peek() != c) fail("malformed .npy header", what, excerpt());
    ++pos_;
  }
  std::string string_literal(const std::string& what) {
    skip();
    char q = peek();
    if (q != '\'' && q != '"') fail("malformed .npy header", what, excerpt());
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string in the .npy header", what, excerpt());
    if (end - pos_ > kMaxStringLen) fail("string too long in the .npy header", what, excerpt());
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool bool_literal() {
    skip();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("malformed .npy header", "True or False for 'fortran_order'", excerpt());
  }
  Shape int_tuple() {
    skip();
    char close = peek() == '(' ? ')' : peek() == '[' ? ']' : '\0';
    if (!close) fail("malformed .npy header", "a tuple such as (8, 256) for 'shape'", excerpt());
    ++pos_;
    Shape out;
    while (true) {
      skip();
      if (peek() == close) {
        ++pos_;
        return out;
      }
      out.push_back(integer());
      skip();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != close) {
        fail("malformed .npy header", "',' or the end of the shape tuple", excerpt());
      }
    }
  }
  int64_t integer() {
    bool neg = false;
    if (peek() == '-' || peek() == '+') neg = s_[pos_++] == '-';
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      fail("malformed .npy header", "an integer dimension in 'shape'", excerpt());
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
          __builtin_add_overflow(v, int64_t{s_[pos_] - '0'}, &v))
        fail("dimension in the .npy shape is too large", "a dimension below 2^63", excerpt());
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2 long literal
    if (neg) fail("negative dimension in the .npy shape", "dimensions >= 0", str("-", v));
    return v;
  }

  static constexpr size_t kMaxStringLen = 64;  // keys and descrs are short
  const std::string& s_;
  const std::string& name_;
  size_t pos_ = 0;
};

/// Little-endian read of an unsigned integer of `n` bytes at `p`.
uint32_t read_le(const std::string& bytes, size_t p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[p + i])) << (8 * i);
  return v;
}

/// Maps a descr ("<f4") to a DType; throws Error for unknown or big-endian descrs.
DType dtype_from_descr(const std::string& descr, const std::string& name) {
  std::string code = descr;
  char order = '=';
  if (!code.empty() && std::strchr("<>|=", code[0])) {
    order = code[0];
    code = code.substr(1);
  }
  for (const auto& t : kNpyTypes) {
    if (code != t.code) continue;
    if (order == '>' && dtype_size(t.dtype) > 1)
      throw Error("big-endian .npy data is not supported", name,
                  "little-endian data (byte order '<', '|' or '='); re-save with "
                  "arr.astype(arr.dtype.newbyteorder('<'))",
                  descr);
    return t.dtype;
  }
  throw Error("unsupported .npy dtype", name, kSupportedDescrs, "descr '" + descr + "'");
}

/// Formats a shape the way Python's repr of a tuple does: "()", "(5,)", "(8, 256)".
std::string py_tuple(const Shape& s) {
  if (s.size() == 1) return "(" + std::to_string(s[0]) + ",)";
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

}  // namespace

std::string npy_descr(DType dtype) {
  for (const auto& t : kNpyTypes) {
    if (t.dtype != dtype) continue;
    return std::string(dtype_size(dtype) == 1 ? "|" : "<") + t.code;
  }
  if (dtype == DType::kBFloat16)
    throw Error("bfloat16 has no .npy type", "write_npy",
                "a tensor converted to float32 first (t.to(DType::kFloat32))", "bf16");
  throw Error(str(dtype_name(dtype), " has no .npy type"), "write_npy",
              "bool, u8, i8, i16, u16, i32, i64, f16, f32, f64, c64 or c128", dtype_name(dtype));
}

Tensor read_npy_bytes(const std::string& bytes, const std::string& name) {
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic) != 0)
    throw Error("not a .npy file (bad magic)", name, "the bytes \"\\x93NUMPY\"",
                str(printable(bytes, kMagicLen), " (", bytes.size(), " bytes in the file)"));
  if (bytes.size() < kMagicLen + 2)
    throw Error("truncated .npy file: no format version", name, "at least 8 bytes",
                str(bytes.size(), " bytes"));
  int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw Error("unsupported .npy format version", name, "1.0, 2.0 or 3.0", str(major, ".", minor));
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t header_start = kMagicLen + 2 + len_bytes;
  if (bytes.size() < header_start)
    throw Error("truncated .npy file: no header length", name,
                str("at least ", header_start, " bytes"), str(bytes.size(), " bytes"));
  const size_t header_len = read_le(bytes, kMagicLen + 2, len_bytes);
  if (bytes.size() - header_start < header_len)
    throw Error("truncated .npy header", name, str(header_len, " header bytes"),
                str(bytes.size() - header_start, " bytes after the header length"));
  const std::string text = bytes.substr(header_start, header_len);
  NpyHeader h = HeaderParser(text, name).parse();
  const DType dtype = dtype_from_descr(h.descr, name);

  // Empty dims count as 1 here: the strides of the other dims must fit in int64 too, even for
  // an array with no elements (shape (2^40, 0, 2^40)).
  int64_t span = 1, nbytes = 0;
  bool empty = false;
  for (int64_t d : h.shape) {
    empty = empty || d == 0;
    if (__builtin_mul_overflow(span, std::max<int64_t>(d, 1), &span))
      throw Error("the .npy shape has too many elements", name,
                  "fewer than 2^63 elements (empty dims counted as 1)", clip(py_tuple(h.shape)));
  }
  const int64_t numel = empty ? 0 : span;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(dtype_size(dtype)), &nbytes))
    throw Error("the .npy shape has too many bytes", name, "fewer than 2^63 bytes",
                clip(py_tuple(h.shape)));
  const size_t data_start = header_start + header_len;
  const size_t available = bytes.size() - data_start;
  if (static_cast<uint64_t>(nbytes) > available)
    throw Error("truncated .npy data", name,
                str(nbytes, " bytes for ", h.descr, " ", clip(py_tuple(h.shape))),
                str(available, " bytes"));

  Tensor raw = Tensor::empty(h.shape, dtype);
  if (nbytes > 0)
    std::memcpy(raw.data_ptr(), bytes.data() + data_start, static_cast<size_t>(nbytes));
  if (dtype == DType::kBool) {  // any non-zero byte is true; keep C++ bools 0 or 1
    auto* p = static_cast<unsigned char*>(raw.data_ptr());
    for (int64_t i = 0; i < numel; ++i) p[i] = p[i] != 0;
  }
  if (!h.fortran_order || h.shape.size() < 2) return raw;
  // Column-major: view the data with Fortran strides, then copy into C order.
  Shape fstrides(h.shape.size());
  int64_t acc = 1;
  for (size_t i = 0; i < h.shape.size(); ++i) {
    fstrides[i] = acc;
    acc *= std::max<int64_t>(h.shape[i], 1);
  }
  Tensor fview(raw.storage(), dtype, h.shape, fstrides, 0);
  if (fview.is_contiguous()) return raw;  // at most one dim > 1: same memory order
  return fview.clone();
}

Tensor read_npy(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot open .npy file", path, "a readable file", std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error("cannot read .npy file", path, "a readable file", std::strerror(err));
  return read_npy_bytes(bytes, path);
}

std::string write_npy_bytes(const Tensor& t) {
  ANVIL_CHECK(t.defined(), "write_npy", "tensor is undefined", "a defined tensor", "none");
  ANVIL_CHECK(t.device().is_cpu(), "write_npy", "tensor is not in host memory", "a cpu tensor",
              t.device().str());
  const std::string descr = npy_descr(t.dtype());
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + py_tuple(t.sizes()) + ", }";
  // Same layout as numpy.save: spare spaces for growing the first axis, then padding to 64.
  if (!t.sizes().empty())
    dict.append(kGrowthAxisMaxDigits - std::to_string(t.sizes()[0]).size(), ' ');
  const size_t hlen = dict.size() + 1;  // + '\n'
  int major = 1;
  size_t len_bytes = 2;
  size_t pad = kArrayAlign - (kMagicLen + 2 + len_bytes + hlen) % kArrayAlign;
  if (hlen + pad > 0xffff) {
    major = 2;
    len_bytes = 4;
    pad = kArrayAlign - (kMagicLen + 2 + len_bytes + hlen) % kArrayAlign;
  }
  const size_t total_header = hlen + pad;
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((total_header >> (8 * i)) & 0xff);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  const Tensor c = t.contiguous();
  const size_t data_at = out.size();
  out.resize(data_at + c.nbytes());
  if (c.nbytes() > 0) std::memcpy(out.data() + data_at, c.data_ptr(), c.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  const std::string bytes = write_npy_bytes(t);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error("cannot create .npy file", path, "a writable path", std::strerror(errno));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed)
    throw Error("cannot write .npy file", path, str(bytes.size(), " bytes written"),
                str(written, " bytes (", std::strerror(err), ")"));
}

}  // namespace anvil
