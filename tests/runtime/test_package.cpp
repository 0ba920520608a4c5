// .anvil packages: layout and alignment, manifest parsing, corrupt and newer packages.
#include <fstream>
#include <functional>
#include <sstream>

#include "common/check.h"
#include "core/zip_reader.h"
#include "runtime/model.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Package, LayoutAndAlignment) {
  const std::string path = write_test_package("layout");
  std::shared_ptr<Package> pkg = Package::open(path);
  EXPECT_EQ(pkg->weights_file_offset() % 64, 0u);
  // The file really holds weights.bin's bytes at that offset.
  const std::string bytes = read_bytes(path);
  ASSERT_LE(pkg->weights_file_offset() + pkg->weights().size(), bytes.size());
  EXPECT_EQ(bytes.substr(pkg->weights_file_offset(), pkg->weights().size()),
            std::string(pkg->weights()));
  const Manifest& m = pkg->manifest();
  ASSERT_EQ(m.constants.size(), 3u);
  for (const ConstantSpec& c : m.constants) EXPECT_EQ(c.offset % 64, 0u) << c.name;
  EXPECT_EQ(m.constants[0].offset, 0u);
  EXPECT_EQ(m.constants[0].nbytes, 64u);  // f32[4, 4]
  EXPECT_EQ(m.constants[1].offset, 64u);
  EXPECT_EQ(m.constants[1].nbytes, 16u);   // f32[4]
  EXPECT_EQ(m.constants[2].offset, 128u);  // i64[1]
  EXPECT_EQ(m.constants[2].strides, (Shape{1}));
  EXPECT_EQ(m.constants[1].dtype, DType::kFloat32);
  // Constants point into the mapping (no copy), 64-byte aligned in memory.
  Tensor w = pkg->constant(0);
  EXPECT_EQ(static_cast<const char*>(w.data_ptr()), pkg->weights().data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data_ptr()) % 64, 0u);
  EXPECT_EQ(w.to_doubles(), default_weight().to_doubles());
  // The archive is a normal zip: libzip reads it, entries stored.
  ZipReader zip = ZipReader::open(path);
  for (const char* name :
       {"manifest.json", "model.so", "weights.bin", "src/entry.cpp", "src/kernels.cpp"}) {
    const ZipEntry* e = zip.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_TRUE(e->stored) << name;
  }
  EXPECT_EQ(zip.read("weights.bin"), std::string(pkg->weights()));
  EXPECT_EQ(pkg->source("kernels.cpp"), kernels_source());
  EXPECT_EQ(pkg->source_names().size(), 2u);
  EXPECT_EQ(m.symbols.size(), 1u);
  EXPECT_EQ(m.symbols[0].range, (SymRange{1, 64}));
  EXPECT_EQ(m.externs, (std::vector<std::string>{"anvil_test.add.default"}));
  EXPECT_EQ(m.planned_peak_bytes, "16*s0");
}

TEST(Package, IdenticalImmutableConstantsAreStoredOnce) {
  register_test_externs();
  // Three constants: W, a copy of W (same bytes) and a non-contiguous view with other bytes.
  std::string manifest = test_manifest(true);
  const std::string needle = R"({"name": "p_b", "original_name": "lin.bias", "kind": "parameter"})";
  manifest.replace(manifest.find(needle), needle.size(),
                   needle + R"(, {"name": "p_w2", "original_name": "other.weight"},
                   {"name": "p_wt", "original_name": "wt"})");
  PackageContents c;
  c.manifest_json = manifest;
  c.model_so_path = test_model_so(true);
  Tensor w = default_weight();
  c.constants = {w, default_bias(), w.clone(), w.transpose(0, 1)};
  const std::string path = temp_dir() + "/dedup.anvil";
  Manifest m = write_package(path, c);
  ASSERT_EQ(m.constants.size(), 4u);
  EXPECT_EQ(m.constants[2].offset, m.constants[0].offset);  // same bytes, stored once
  EXPECT_NE(m.constants[3].offset, m.constants[0].offset);
  auto pkg = Package::open(path);
  EXPECT_EQ(pkg->weights().size(), 64u + 64u + 64u);  // W, b (padded), W^T
  // The transposed view was stored contiguous with its own values.
  EXPECT_EQ(pkg->constant(3).to_doubles(), w.transpose(0, 1).contiguous().to_doubles());
  EXPECT_EQ(pkg->constant(3).strides(), (Shape{4, 1}));
  // The model still runs (it uses constants 0 and 1).
  Model model = Model::load(path);
  EXPECT_EQ(model.constant_names().size(), 4u);
}

/// Copies package `src` to `dst` with manifest.json's text passed through `edit`.
void rezip(const std::string& src, const std::string& dst,
           const std::function<std::string(std::string)>& edit) {
  ZipReader in = ZipReader::open(src);
  ZipWriter out(dst);
  for (const ZipEntry& e : in.entries())
    out.add(e.name, e.name == "manifest.json" ? edit(in.read(e)) : in.read(e), 64);
  out.finish();
}

TEST(Package, NewerFormatVersionIsRefused) {
  // The writer itself refuses to write a version it does not know.
  std::string e =
      error_of([] { write_test_package("newer_w", true, {}, {}, test_manifest(true, 2)); });
  EXPECT_NE(e.find("newer than this runtime supports"), std::string::npos) << e;
  const std::string path = temp_dir() + "/newer.anvil";
  rezip(write_test_package("newer_src", true), path, [](std::string m) {
    const std::string from = "\"format_version\": 1";
    m.replace(m.find(from), from.size(), "\"format_version\": 2");
    return m;
  });
  e = error_of([&] { Package::open(path); });
  EXPECT_NE(e.find("package format version 2 is newer than this runtime supports"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("expected format_version <= 1, got 2"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { Model::load(path); }).find("newer"), std::string::npos);
}

TEST(Package, CorruptPackagesGiveErrors) {
  const std::string good = read_bytes(write_test_package("corrupt_src", true));
  const std::string path = temp_dir() + "/corrupt.anvil";
  auto open_err = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return error_of([&] { Model::load(path); });
  };
  EXPECT_NE(open_err("").find("too small"), std::string::npos);
  EXPECT_NE(open_err("not a zip file at all, just some text").find("corrupt package"),
            std::string::npos);
  // Truncations at many points: always an Error, never a crash.
  for (size_t cut : {good.size() - 1, good.size() - 30, good.size() / 2, size_t{100}, size_t{30}}) {
    const std::string e = open_err(good.substr(0, cut));
    // The end-of-central-directory record is the archive's last bytes: any cut loses it.
    EXPECT_TRUE(anvil::test::error_says(e, "corrupt package: no end-of-central-directory record"))
        << "truncated at " << cut;
  }
  // Flipped bytes all over the file: an Error or (for bytes nobody checks) a valid load.
  for (size_t pos = 0; pos < good.size(); pos += good.size() / 97 + 1) {
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x5A);
    write_bytes(path, bad);
    try {
      Model m = Model::load(path);
    } catch (const Error&) {
    }
  }
  // A damaged manifest fails its CRC check.
  std::string bad = good;
  const size_t at = bad.find("\"abi_version\"");
  ASSERT_NE(at, std::string::npos);
  bad[at + 1] = 'X';
  EXPECT_NE(open_err(bad).find("manifest.json fails its CRC check"), std::string::npos);
  // Missing entries.
  const std::string only_manifest =
      zip_bytes({{"manifest.json", R"({"format_version": 1, "abi_version": 1, "target": "cpu"})"}});
  const std::string no_so = open_err(only_manifest);
  EXPECT_NE(no_so.find("package has no model.so"), std::string::npos) << no_so;
  // Compressed entries are refused (packages hold stored entries).
  // (ZipWriter only writes stored entries; patch the method field of the first record and of
  // its local header, which must agree.)
  std::string compressed = zip_bytes({{"manifest.json", test_manifest(true)}});
  const size_t cd = compressed.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  compressed[cd + 10] = 8;
  compressed[8] = 8;
  EXPECT_NE(open_err(compressed).find("package entry is compressed"), std::string::npos);
}

TEST(Package, ManifestErrorsAreClear) {
  auto parse_err = [](const std::string& text) {
    return error_of([&] { Manifest::parse(text, "p.anvil"); });
  };
  EXPECT_NE(parse_err("{").find("manifest.json is not valid JSON"), std::string::npos);
  EXPECT_NE(parse_err("[]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(
      parse_err(R"({"abi_version": 1, "target": "cpu"})").find("missing field 'format_version'"),
      std::string::npos);
  std::string e = parse_err(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "inputs": [{"name": "x", "dtype": "f32", "sizes": ["s9"]}]})");
  EXPECT_NE(e.find("undeclared symbol 's9'"), std::string::npos) << e;
  e = parse_err(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "inputs": [{"name": "x", "dtype": "f99", "sizes": [1]}]})");
  EXPECT_NE(e.find("bad manifest field 'inputs[0].dtype'"), std::string::npos) << e;
  e = parse_err(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "constants": [{"name": "c", "dtype": "f32", "sizes": [4], "offset": 0, "nbytes": 8}]})");
  EXPECT_NE(e.find("constants[0] ('c'): constant's nbytes is smaller than what its dtype and sizes "
                   "need (expected 16 bytes (f32 [4]), got 8)"),
            std::string::npos)
      << e;
  e = parse_err(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "symbols": [{"name": "s0", "min": 5, "max": 2}]})");
  EXPECT_NE(e.find("bad symbol range"), std::string::npos) << e;
  e = parse_err(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "inputs": [{"name": "x", "dtype": "f32", "sizes": [1], "mutated": "yes"}]})");
  EXPECT_NE(e.find("inputs[0].mutated"), std::string::npos) << e;
  EXPECT_NE(e.find("true or false"), std::string::npos) << e;
  Manifest ok = Manifest::parse(R"({"format_version": 1, "abi_version": 1, "target": "cpu",
      "symbols": [{"name": "s0", "min": 2, "max": null}],
      "inputs": [{"name": "x", "dtype": "bf16", "sizes": ["2*s0", 3]},
                 {"name": "y", "dtype": "f32", "sizes": [2], "mutated": true}]})",
                                "p.anvil");
  EXPECT_EQ(ok.symbols[0].range.max, SymRange::kSymMax);
  EXPECT_EQ(ok.inputs[0].dtype, DType::kBFloat16);
  EXPECT_EQ(ok.inputs[0].sizes[0], SymInt::symbol("s0") * SymInt(2));
  EXPECT_FALSE(ok.inputs[0].mutated);  // absent: false (packages before the field)
  EXPECT_TRUE(ok.inputs[1].mutated);
}

TEST(Package, WriterRejectsInconsistentInput) {
  PackageContents c;
  c.manifest_json = test_manifest(true);
  c.model_so_path = test_model_so(true);
  c.constants = {default_weight()};  // the manifest lists two
  std::string e = error_of([&] { write_package(temp_dir() + "/bad.anvil", c); });
  EXPECT_NE(e.find("constants table does not match"), std::string::npos) << e;
  c.constants = {default_weight(), default_bias().to(DType::kFloat64)};
  std::string manifest = test_manifest(true);
  const std::string needle = R"("kind": "parameter"})";
  manifest.replace(manifest.rfind(needle), needle.size(),
                   R"("kind": "parameter", "dtype": "f32"})");
  c.manifest_json = manifest;
  e = error_of([&] { write_package(temp_dir() + "/bad.anvil", c); });
  EXPECT_NE(e.find("constant dtype does not match the manifest (expected f32, got f64)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace anvil::runtime::test
