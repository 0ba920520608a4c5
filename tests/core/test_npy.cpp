// Tests for .npy read and write: every dtype against files numpy wrote (byte-identical output),
// Fortran order, format versions, 0-d and empty arrays, fixtures, and malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

#include "common/check.h"
#include "core/npy.h"

namespace anvil {
namespace {

using D = DType;
using V = std::vector<double>;

std::string data_path(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/../core/data/" + name;
}

std::string fixture_path(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/" + name;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// A .npy file with the given header dict text (unpadded) and data, format `major`.0.
std::string make_npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::string header = dict + "\n";
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

std::string header_for(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// Reads a numpy-written file, checks dtype and shape, and checks that writing it back gives
/// exactly numpy's bytes.
Tensor read_and_check(const std::string& name, D dtype, const Shape& shape) {
  const std::string path = data_path(name);
  Tensor t = read_npy(path);
  EXPECT_EQ(t.dtype(), dtype) << name;
  EXPECT_EQ(t.sizes(), shape) << name;
  EXPECT_TRUE(t.is_contiguous()) << name;
  EXPECT_EQ(write_npy_bytes(t), file_bytes(path)) << name << ": not byte-identical to numpy.save";
  return t;
}

TEST(Npy, ReadsEveryDtypeNumpyWritesAndWritesTheSameBytes) {
  EXPECT_EQ(read_and_check("u1.npy", D::kUInt8, {4}).to_doubles(), (V{0, 1, 127, 255}));
  EXPECT_EQ(read_and_check("i1.npy", D::kInt8, {4}).to_doubles(), (V{-128, -1, 0, 127}));
  EXPECT_EQ(read_and_check("i2.npy", D::kInt16, {2, 2}).to_doubles(), (V{-32768, -1, 2, 32767}));
  EXPECT_EQ(read_and_check("u2.npy", D::kUInt16, {3}).to_doubles(), (V{0, 1, 65535}));
  EXPECT_EQ(read_and_check("i4.npy", D::kInt32, {4}).to_doubles(),
            (V{-2147483648.0, -5, 7, 2147483647}));
  Tensor i8 = read_and_check("i8.npy", D::kInt64, {2, 3});
  const int64_t* p = i8.data<int64_t>();
  EXPECT_EQ(p[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(p[1], -1);
  EXPECT_EQ(p[4], int64_t{1} << 40);
  EXPECT_EQ(p[5], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(read_and_check("f2.npy", D::kFloat16, {5}).to_doubles(),
            (V{1.0, -2.5, 65504.0, std::ldexp(1.0, -24), INFINITY}));
  EXPECT_EQ(read_and_check("f4.npy", D::kFloat32, {2, 3}).to_doubles(),
            (V{0.5, -1.25, 3.0, static_cast<double>(1e-30f), -INFINITY, 100.0}));
  EXPECT_EQ(read_and_check("f8.npy", D::kFloat64, {3}).to_doubles(),
            (V{0.1, -std::numeric_limits<double>::denorm_min(), 1e300}));
  Tensor c8 = read_and_check("c8.npy", D::kComplex64, {2});
  EXPECT_EQ(c8.data<std::complex<float>>()[0], std::complex<float>(1, 2));
  EXPECT_EQ(c8.data<std::complex<float>>()[1], std::complex<float>(-3.5f, -0.25f));
  Tensor c16 = read_and_check("c16.npy", D::kComplex128, {2, 1});
  EXPECT_EQ(c16.data<std::complex<double>>()[0], std::complex<double>(0.1, 0.2));
  EXPECT_EQ(c16.data<std::complex<double>>()[1], std::complex<double>(-1e200, 1));
  EXPECT_EQ(read_and_check("b1.npy", D::kBool, {5}).to_doubles(), (V{1, 0, 0, 1, 1}));
}

TEST(Npy, ZeroDimAndZeroSize) {
  Tensor s = read_and_check("scalar_f8.npy", D::kFloat64, {});
  EXPECT_EQ(s.item(), 3.5);
  Tensor e = read_and_check("empty_f4_0x3.npy", D::kFloat32, {0, 3});
  EXPECT_EQ(e.numel(), 0);
  Tensor e2 = read_npy_bytes(make_npy(header_for("<i8", "(4, 0, 2)"), ""), "mem");
  EXPECT_EQ(e2.sizes(), (Shape{4, 0, 2}));
  Tensor e3 = read_npy_bytes(make_npy(header_for("<f4", "(0, 3)", true), ""), "mem");
  EXPECT_EQ(e3.sizes(), (Shape{0, 3}));
}

TEST(Npy, FortranOrderBecomesCOrder) {
  Tensor f = read_npy(data_path("fortran_f4_2x3.npy"));
  EXPECT_EQ(f.sizes(), (Shape{2, 3}));
  EXPECT_EQ(f.strides(), (Shape{3, 1}));
  EXPECT_EQ(f.to_doubles(), (V{0, 1, 2, 3, 4, 5}));
  Tensor g = read_npy(data_path("fortran_i2_2x3x4.npy"));
  EXPECT_EQ(g.dtype(), D::kInt16);
  EXPECT_EQ(g.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(g.strides(), (Shape{12, 4, 1}));
  V want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  EXPECT_EQ(g.to_doubles(), want);
  // Hand-made: column-major data 1..6 for shape (3, 2) is [[1, 4], [2, 5], [3, 6]].
  const std::string data = raw_bytes(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  Tensor h = read_npy_bytes(make_npy(header_for("<i4", "(3, 2)", true), data), "mem");
  EXPECT_EQ(h.to_doubles(), (V{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(h.strides(), (Shape{2, 1}));
  // Shapes with one dim > 1 have the same memory order either way.
  Tensor row = read_npy_bytes(make_npy(header_for("<i4", "(1, 6)", true), data), "mem");
  EXPECT_EQ(row.strides(), (Shape{6, 1}));
  EXPECT_EQ(row.to_doubles(), (V{1, 2, 3, 4, 5, 6}));
  Tensor one_d = read_npy_bytes(make_npy(header_for("<i4", "(6,)", true), data), "mem");
  EXPECT_EQ(one_d.to_doubles(), (V{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, FormatVersions2And3) {
  Tensor v2 = read_npy(data_path("v2_f8.npy"));
  EXPECT_EQ(v2.sizes(), (Shape{1, 2}));
  EXPECT_EQ(v2.to_doubles(), (V{1.5, 2.5}));
  Tensor v3 = read_npy(data_path("v3_i4.npy"));
  EXPECT_EQ(v3.dtype(), D::kInt32);
  EXPECT_EQ(v3.to_doubles(), (V{7, 8, 9}));
  const std::string data = raw_bytes(std::vector<float>{1.5f});
  EXPECT_EQ(read_npy_bytes(make_npy(header_for("<f4", "(1,)"), data, 2), "m").item(), 1.5);
  // A header too long for format 1.0's 16-bit length is written as 2.0 (numpy does the same).
  Tensor many = Tensor::full(Shape(22000, 1), 2.0, D::kFloat32);
  const std::string bytes = write_npy_bytes(many);
  EXPECT_EQ(bytes[6], 2);
  EXPECT_EQ(bytes.size() % 64, 4u);  // header padded to 64, then 4 data bytes
  Tensor back = read_npy_bytes(bytes, "long");
  EXPECT_EQ(back.sizes(), many.sizes());
  EXPECT_EQ(back.item(), 2.0);
}

TEST(Npy, ByteOrderCharacters) {
  const std::string f = raw_bytes(std::vector<float>{1.0f, -2.0f});
  EXPECT_EQ(read_npy_bytes(make_npy(header_for("=f4", "(2,)"), f), "m").to_doubles(), (V{1, -2}));
  EXPECT_EQ(read_npy_bytes(make_npy(header_for("<f4", "(2,)"), f), "m").to_doubles(), (V{1, -2}));
  EXPECT_EQ(read_npy_bytes(make_npy(header_for("|u1", "(2,)"), "\x05\x07"), "m").to_doubles(),
            (V{5, 7}));
  EXPECT_EQ(read_npy_bytes(make_npy(header_for("|b1", "(2,)"), std::string("\x01\x00", 2)), "m")
                .to_doubles(),
            (V{1, 0}));
  // Byte order does not matter for one-byte types.
  EXPECT_EQ(read_npy_bytes(make_npy(header_for(">i1", "(1,)"), "\xff"), "m").item(), -1.0);
  // Big-endian multi-byte data is refused with a message saying so.
  for (const std::string& bad : {std::string(">f4"), std::string(">i8"), std::string(">c8")}) {
    try {
      read_npy_bytes(make_npy(header_for(bad, "(1,)"), std::string(16, '\0')), "be.npy");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("big-endian"), std::string::npos) << e.what();
      EXPECT_EQ(e.where(), "be.npy");
      EXPECT_NE(e.actual().find(bad), std::string::npos);
    }
  }
  try {
    read_npy(data_path("big_endian_f4.npy"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("big-endian"), std::string::npos);
    EXPECT_NE(e.where().find("big_endian_f4.npy"), std::string::npos);
  }
}

TEST(Npy, BoolBytesAreNormalised) {
  Tensor b =
      read_npy_bytes(make_npy(header_for("|b1", "(3,)"), std::string("\x02\x00\xff", 3)), "m");
  const bool* p = b.data<bool>();
  unsigned char raw[3];
  std::memcpy(raw, p, 3);
  EXPECT_EQ(raw[0], 1);
  EXPECT_EQ(raw[1], 0);
  EXPECT_EQ(raw[2], 1);
}

TEST(Npy, HeaderVariantsNumpyAccepts) {
  const std::string d = raw_bytes(std::vector<int16_t>{3, 4});
  // Keys in another order, double quotes, no trailing comma, extra spaces, Python 2 longs.
  const char* dicts[] = {
      "{'shape': (2,), 'fortran_order': False, 'descr': '<i2'}",
      "{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2,)}",
      "{ 'descr' : '<i2' ,'fortran_order':False,'shape':( 2 , ) }   ",
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2L,), }",
      "{'descr': '<i2', 'fortran_order': False, 'shape': [2], }",
  };
  for (const char* dict : dicts) {
    EXPECT_EQ(read_npy_bytes(make_npy(dict, d), "m").to_doubles(), (V{3, 4})) << dict;
  }
}

TEST(Npy, RoundTripEveryDtypeFromStridedTensors) {
  const D dtypes[] = {D::kUInt8,   D::kInt8,      D::kInt16,      D::kUInt16,
                      D::kInt32,   D::kInt64,     D::kFloat16,    D::kFloat32,
                      D::kFloat64, D::kComplex64, D::kComplex128, D::kBool};
  for (D dt : dtypes) {
    // [[0, 1, 2], [3, 4, 5]] transposed, so the writer has to gather in C order.
    Tensor base = Tensor::empty({2, 3}, dt);
    base.copy_from(Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3}));
    Tensor t = base.transpose(0, 1);
    Tensor back = read_npy_bytes(write_npy_bytes(t), "roundtrip");
    EXPECT_EQ(back.dtype(), dt) << dtype_name(dt);
    EXPECT_EQ(back.sizes(), (Shape{3, 2}));
    V want = dt == D::kBool ? V{0, 1, 1, 1, 1, 1} : V{0, 3, 1, 4, 2, 5};
    EXPECT_EQ(back.to_doubles(), want) << dtype_name(dt);
  }
  // Slices with steps, offsets and broadcast (stride 0) views.
  Tensor a = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(read_npy_bytes(write_npy_bytes(a.slice(0, 1, 10, 3)), "m").to_doubles(), (V{1, 4, 7}));
  Tensor col = a.slice(0, 2, 4).view({2, 1}).expand({2, 3});
  EXPECT_EQ(read_npy_bytes(write_npy_bytes(col), "m").to_doubles(), (V{2, 2, 2, 3, 3, 3}));
  // 0-d and empty round trips.
  EXPECT_EQ(read_npy_bytes(write_npy_bytes(Tensor::scalar(-4, D::kInt32)), "m").sizes(), Shape{});
  EXPECT_EQ(read_npy_bytes(write_npy_bytes(Tensor::empty({3, 0}, D::kFloat16)), "m").sizes(),
            (Shape{3, 0}));
}

TEST(Npy, WriteAndReadFiles) {
  const std::string path = ::testing::TempDir() + "/anvil_npy_test.npy";
  Tensor t = Tensor::from_vector(std::vector<double>{1.25, -8, 1e-300}, {3, 1});
  write_npy(path, t);
  Tensor back = read_npy(path);
  EXPECT_EQ(back.sizes(), (Shape{3, 1}));
  EXPECT_EQ(back.to_doubles(), (V{1.25, -8, 1e-300}));
  std::remove(path.c_str());
  try {
    write_npy("/nonexistent-dir/x/out.npy", t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "/nonexistent-dir/x/out.npy");
  }
  try {
    read_npy("/nonexistent-dir/in.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "/nonexistent-dir/in.npy");
    EXPECT_NE(e.actual().find("No such file"), std::string::npos) << e.actual();
  }
  ANVIL_EXPECT_ERROR(read_npy(::testing::TempDir()), "cannot read .npy file");  // a directory
}

TEST(Npy, Bfloat16AndOtherTypesWithoutNpyEquivalentAreRefused) {
  Tensor bf = Tensor::full({2}, 1.5, D::kBFloat16);
  try {
    write_npy_bytes(bf);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos);
    EXPECT_NE(e.expected().find("float32"), std::string::npos) << e.expected();
  }
  // Converting first works.
  EXPECT_EQ(read_npy_bytes(write_npy_bytes(bf.to(D::kFloat32)), "m").to_doubles(), (V{1.5, 1.5}));
  ANVIL_EXPECT_ERROR(write_npy_bytes(Tensor()), "tensor is undefined");
  EXPECT_EQ(npy_descr(D::kFloat32), "<f4");
  EXPECT_EQ(npy_descr(D::kBool), "|b1");
  EXPECT_EQ(npy_descr(D::kComplex128), "<c16");
  ANVIL_EXPECT_ERROR(npy_descr(D::kFloat8E5M2), "f8e5m2 has no .npy type");
  ANVIL_EXPECT_ERROR(npy_descr(D::kComplex32), "c32 has no .npy type");
}

TEST(Npy, ReadsFixtures) {
  Tensor in = read_npy(fixture_path("mlp_small.in0.npy"));
  EXPECT_EQ(in.type_str(), "f32[8, 256]");
  // Values from numpy.
  EXPECT_EQ(in.item_at(0), static_cast<double>(0.09613588452339172f));
  EXPECT_EQ(in.item_at(1), static_cast<double>(-0.8443485498428345f));
  EXPECT_EQ(in.item_at(8 * 256 - 1), static_cast<double>(0.1785530298948288f));
  double sum = 0;
  for (double v : in.to_doubles()) sum += v;
  EXPECT_NEAR(sum, 9.892984859936405, 1e-9);
  EXPECT_EQ(write_npy_bytes(in), file_bytes(fixture_path("mlp_small.in0.npy")));

  Tensor ids = read_npy(fixture_path("bert_tiny.in0.npy"));
  EXPECT_EQ(ids.type_str(), "i64[2, 16]");
  const V all = ids.to_doubles();
  V first(all.begin(), all.begin() + 6);
  EXPECT_EQ(first, (V{172, 47, 117, 192, 67, 251}));
  double isum = 0;
  for (double v : all) isum += v;
  EXPECT_EQ(isum, 3710);

  Tensor s = read_npy(fixture_path("const_and_buffer.out1.npy"));
  EXPECT_EQ(s.type_str(), "i64[]");
  EXPECT_EQ(s.item(), 1.0);

  Tensor img = read_npy(fixture_path("small_cnn.in0.npy"));
  EXPECT_EQ(img.type_str(), "f32[2, 3, 32, 32]");
  EXPECT_EQ(img.item_at(img.numel() - 1), static_cast<double>(0.7826592326164246f));
}

/// Expects read_npy_bytes(bytes) to throw an Error naming "bad.npy" whose message contains
/// `what_has`, with non-empty expected and actual parts.
void expect_npy_error(const std::string& bytes, const std::string& what_has) {
  try {
    Tensor t = read_npy_bytes(bytes, "bad.npy");
    ADD_FAILURE() << "accepted; wanted an error containing '" << what_has << "', got "
                  << t.type_str();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "bad.npy") << e.what();
    EXPECT_NE(e.what_part().find(what_has), std::string::npos)
        << "'" << e.what() << "' lacks '" << what_has << "'";
    EXPECT_FALSE(e.expected().empty()) << e.what();
    EXPECT_FALSE(e.actual().empty()) << e.what();
  }
}

TEST(Npy, MalformedFilesGiveClearErrors) {
  const std::string f4 = raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
  expect_npy_error("", "bad magic");
  expect_npy_error("hello world, not an array", "bad magic");
  expect_npy_error(std::string("\x93NUMPX\x01\x00", 8), "bad magic");
  expect_npy_error(std::string("\x93NUMPY", 6), "no format version");
  expect_npy_error(std::string("\x93NUMPY\x04\x00\x10\x00", 10), "format version");
  expect_npy_error(std::string("\x93NUMPY\x01\x01\x10\x00", 10), "format version");
  expect_npy_error(std::string("\x93NUMPY\x01\x00\x10", 9), "no header length");
  expect_npy_error(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "no header length");
  expect_npy_error(std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17), "truncated .npy header");
  expect_npy_error(make_npy("not a dict", f4), "malformed");
  expect_npy_error(make_npy("", f4), "malformed");
  expect_npy_error(make_npy("{'descr': '<f4', 'shape': (6,)}", f4), "fortran_order");
  expect_npy_error(make_npy("{'fortran_order': False, 'shape': (6,)}", f4), "descr");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False}", f4), "shape");
  expect_npy_error(make_npy("{}", f4), "descr");
  expect_npy_error(make_npy(header_for("<f4", "(6,)").substr(0, 40), f4), "malformed .npy header");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", f4),
                   "unexpected key");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': 1, 'shape': (6,)}", f4),
                   "malformed");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': 6}", f4),
                   "malformed");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", f4),
                   "malformed");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", f4),
                   "malformed");
  expect_npy_error(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} junk", f4),
                   "after the header");
  expect_npy_error(make_npy("{'descr': '<f4", f4), "unterminated");
  expect_npy_error(make_npy("{'" + std::string(1000, 'k') + "': 1}", f4), "too long");
  expect_npy_error(make_npy("{'descr': <f4, 'fortran_order': False, 'shape': (6,)}", f4),
                   "malformed");
  for (const char* descr : {"<u4", "<u8", "<f16", "<U5", "|O", "|S3", "<M8[ns]", "f", "", "<"})
    expect_npy_error(make_npy(header_for(descr, "(6,)"), f4), "unsupported .npy dtype");
  expect_npy_error(file_bytes(data_path("structured.npy")), "structured");
  expect_npy_error(file_bytes(data_path("u4.npy")), "unsupported .npy dtype");
  expect_npy_error(make_npy(header_for("<f4", "(-1, 3)"), f4), "negative dimension");
  expect_npy_error(make_npy(header_for("<f4", "(4611686018427387904, 4)"), f4),
                   "too many elements");
  expect_npy_error(make_npy(header_for("<f8", "(2305843009213693952,)"), f4), "too many bytes");
  expect_npy_error(make_npy(header_for("<f4", "(99999999999999999999,)"), f4), "too large");
  expect_npy_error(make_npy(header_for("<f4", "(1000000000000,)"), f4), "truncated .npy data");
  expect_npy_error(make_npy(header_for("<f4", "(7,)"), f4), "truncated .npy data");
  expect_npy_error(make_npy(header_for("<c16", "()"), f4.substr(0, 15)), "truncated .npy data");
  // The data-size message names the need and what is there.
  try {
    read_npy_bytes(make_npy(header_for("<f4", "(2, 4)"), f4), "short.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.expected(), "32 bytes for <f4 (2, 4)");
    EXPECT_EQ(e.actual(), "24 bytes");
  }
}

TEST(Npy, EveryTruncationAndHeaderByteFlipFailsCleanly) {
  const std::string good = file_bytes(data_path("fortran_i2_2x3x4.npy"));
  // A version 1.0 file: 6 magic bytes, 2 version bytes, a 2-byte header length, the header.
  ASSERT_EQ(good.substr(6, 2), std::string("\x01\x00", 2));
  const size_t data_start =
      10 + static_cast<unsigned char>(good[8]) + 256 * static_cast<unsigned char>(good[9]);
  for (size_t n = 0; n < good.size(); ++n) {
    const char* want = n < 6            ? "bad magic"
                       : n < 8          ? "no format version"
                       : n < 10         ? "no header length"
                       : n < data_start ? "truncated .npy header"
                                        : "truncated .npy data";
    ANVIL_EXPECT_ERROR(read_npy_bytes(good.substr(0, n), "cut.npy"), want) << n;
  }
  EXPECT_NO_THROW(read_npy_bytes(good, "whole.npy"));
  // Flip every header byte to a few values: an Error or a valid tensor, never a crash.
  int accepted = 0;
  for (size_t i = 0; i < 128 && i < good.size(); ++i) {
    for (unsigned char v : {0x00, 0x20, 0x27, 0x28, 0x2c, 0x2d, 0x39, 0x7b, 0x7d, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(v);
      try {
        Tensor t = read_npy_bytes(bad, "flip.npy");
        EXPECT_LE(static_cast<size_t>(t.nbytes()), good.size());
        ++accepted;
      } catch (const Error& e) {
        EXPECT_EQ(e.where(), "flip.npy");
      }
    }
  }
  EXPECT_GT(accepted, 0);  // e.g. padding spaces changed to other whitespace-free bytes
}

}  // namespace
}  // namespace anvil
