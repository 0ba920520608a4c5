// Hostile .anvil packages (written here from a good one's pieces): constants outside weights.bin,
// overlapping, misaligned or sized unlike their dtype x numel; unsafe entry names, symlinks,
// duplicate entries, local headers that disagree. Package::open refuses each naming the
// constant or entry, and Model::load never dlopens the model.so of a package that fails them.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/toolchain.h"
#include "common/check.h"
#include "common/hostile_zip.h"
#include "core/zip_reader.h"
#include "runtime/model.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

using Json = nlohmann::json;
using anvil::test::central_record;
using anvil::test::local_header;
using anvil::test::put_le;
using anvil::test::rename_entry;

template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The pieces of a good package: its manifest (parsed), model.so and weights.bin.
struct Pieces {
  Json manifest;
  std::string so, weights;
  std::vector<std::pair<std::string, std::string>> extra;  // more entries, after weights.bin
};

Pieces pieces_of(const std::string& package) {
  ZipReader z = ZipReader::open(package);
  return {Json::parse(z.read("manifest.json")), z.read("model.so"), z.read("weights.bin"), {}};
}

/// Writes `p` as a package the way write_package lays one out, without its checks.
std::string write_pieces(const Pieces& p, const std::string& name) {
  const std::string path = temp_dir() + "/" + name + ".anvil";
  ZipWriter w(path);
  w.add("manifest.json", p.manifest.dump(2), 1);
  w.add("model.so", p.so, kWeightsAlignment);
  w.add("weights.bin", p.weights, 4096);
  for (const auto& [entry, data] : p.extra) w.add(entry, data, 1);
  w.finish();
  return path;
}

/// The stateless test package's pieces: constants p_w f32[4, 4] at 0 and p_b f32[4] at 64,
/// in a weights.bin grown to 256 bytes so that in-bounds overlaps can be declared.
Pieces stateless_pieces() {
  Pieces p = pieces_of(write_test_package("hostile_base", /*stateless=*/true));
  p.weights.resize(256, '\0');
  return p;
}

std::string open_error(const Pieces& p, const std::string& name) {
  const std::string path = write_pieces(p, name);
  return error_of([&] { Package::open(path); });
}

#define EXPECT_SAYS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "'" << (part) << "' in: " << (message)

TEST(PackageHostile, ConstantsOutsideWeightsAreRefused) {
  Pieces p = stateless_pieces();
  ASSERT_EQ(open_error(p, "in_bounds"), "");  // the base package opens
  p.manifest["constants"][1]["offset"] = 256;
  std::string e = open_error(p, "outside");
  EXPECT_SAYS(e, "outside.anvil: p_b: constant lies outside weights.bin");
  EXPECT_SAYS(e, "expected offset + nbytes <= 256, got 256 + 16");
  // Offsets and sizes near 2^64 cannot wrap around into the file.
  p.manifest["constants"][1]["offset"] = uint64_t{1} << 63;
  e = open_error(p, "wrap");
  EXPECT_SAYS(e, "p_b: constant lies outside weights.bin");
  p = stateless_pieces();
  p.manifest["constants"][1]["sizes"] = {uint64_t{1} << 40};
  p.manifest["constants"][1]["strides"] = {1};
  p.manifest["constants"][1]["nbytes"] = uint64_t{1} << 42;
  e = open_error(p, "huge");
  EXPECT_SAYS(e, "p_b: constant lies outside weights.bin");
}

TEST(PackageHostile, OverlappingConstantsAreRefused) {
  Pieces p = stateless_pieces();
  p.manifest["constants"][1]["offset"] = 0;  // p_b's 16 bytes inside p_w's 64
  std::string e = open_error(p, "overlap");
  EXPECT_SAYS(e, "overlap.anvil: p_w: constants overlap in weights.bin");
  EXPECT_SAYS(e, "after 'p_b' at [0, 16)");
  // The same range is shared storage only when both constants are immutable.
  p = stateless_pieces();
  for (Json& c : p.manifest["constants"]) {
    c["sizes"] = {4, 4};
    c["strides"] = {4, 1};
    c["offset"] = 0;
    c["nbytes"] = 64;
  }
  EXPECT_EQ(open_error(p, "shared"), "");
  const auto shared = Package::open(temp_dir() + "/shared.anvil");
  EXPECT_EQ(shared->constant(0).to_doubles(), shared->constant(1).to_doubles());
  EXPECT_EQ(shared->constant(1).to_doubles(), default_weight().to_doubles());
  p.manifest["constants"][1]["mutable"] = true;
  e = open_error(p, "shared_mutable");
  EXPECT_SAYS(e, "shared_mutable.anvil: p_b: constants overlap in weights.bin");
}

TEST(PackageHostile, MisalignedAndMissizedConstantsAreRefused) {
  Pieces p = stateless_pieces();
  p.manifest["constants"][1]["offset"] = 68;
  std::string e = open_error(p, "misaligned");
  EXPECT_SAYS(e, "misaligned.anvil: p_b: constant is not 64-byte aligned in weights.bin");
  p = stateless_pieces();
  p.manifest["constants"][1]["nbytes"] = 32;  // f32[4] is 16 bytes
  e = open_error(p, "big_nbytes");
  EXPECT_SAYS(e, "constants[1] ('p_b'): constant's nbytes exceeds what its dtype and sizes need");
  EXPECT_SAYS(e, "expected 16 bytes (f32 [4]), got 32");
  p.manifest["constants"][1]["nbytes"] = 8;
  EXPECT_SAYS(open_error(p, "small_nbytes"), "('p_b'): constant's nbytes is smaller than");
  // Sizes whose byte count overflows, and strides that reach past 2^63 bytes.
  p = stateless_pieces();
  p.manifest["constants"][1]["sizes"] = {int64_t{1} << 62, 4};
  p.manifest["constants"][1].erase("strides");
  e = open_error(p, "overflow");
  EXPECT_SAYS(e, "bad manifest field 'constants[1].sizes'");
  EXPECT_SAYS(e, "a tensor of fewer than 2^63 bytes");
  p.manifest["constants"][1]["sizes"] = {1 << 20, 1 << 20};
  p.manifest["constants"][1]["strides"] = {int64_t{1} << 50, 1};
  e = open_error(p, "stride_overflow");
  EXPECT_SAYS(e, "bad manifest field 'constants[1].strides'");
  EXPECT_SAYS(e, "a layout within 2^63 bytes");
}

TEST(PackageHostile, UnsafeEntriesAreRefused) {
  Pieces p = stateless_pieces();
  p.extra = {{"src/aaaaaaaaaa", "int x;"}};
  const std::string base = file_bytes(write_pieces(p, "entries"));
  auto err = [&](const std::string& bytes) {
    const std::string path = temp_dir() + "/patched.anvil";
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
    return error_of([&] { Package::open(path); });
  };
  ASSERT_EQ(err(base), "");
  std::string bad = base;
  rename_entry(bad, 3, "src/../../evil");
  std::string e = err(bad);
  EXPECT_SAYS(e, "patched.anvil: src/../../evil: unsafe entry name: it has a '..' component");
  bad = base;
  rename_entry(bad, 3, "/tmp/aaaaaaaaa");
  EXPECT_SAYS(err(bad), "/tmp/aaaaaaaaa: unsafe entry name: it has an absolute path");
  bad = base;
  put_le(bad, central_record(bad, 1) + 4, (3 << 8) | 30, 2);  // model.so as a Unix symlink
  put_le(bad, central_record(bad, 1) + 38, uint64_t{0120777} << 16, 4);
  EXPECT_SAYS(err(bad), "patched.anvil: model.so: symlink entries are not allowed");
  bad = base;
  rename_entry(bad, 3, std::string("model.so\0aaaaa", 14));
  EXPECT_SAYS(err(bad), "model.so\\x00aaaaa: unsafe entry name: it has a NUL byte");
  bad = base;
  put_le(bad, local_header(bad, 2) + 22, 0x7FFFFFFF, 4);  // weights.bin's local size
  EXPECT_SAYS(err(bad), "patched.anvil: weights.bin: local header disagrees with the central");
  // write_package never writes such names (and leaves no file behind).
  PackageContents c;
  c.manifest_json = test_manifest(true);
  c.model_so_bytes = p.so;
  c.constants = {default_weight(), default_bias()};
  c.sources = {{"../evil.cpp", "int x;"}};
  const std::string out = temp_dir() + "/never.anvil";
  EXPECT_SAYS(error_of([&] { write_package(out, c); }), "unsafe entry name");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(PackageHostile, DuplicateEntriesAreRefused) {
  Pieces p = stateless_pieces();
  p.extra = {{"model.sx", "not the library"}};
  std::string bytes = file_bytes(write_pieces(p, "dup"));
  rename_entry(bytes, 3, "model.so");
  const std::string path = temp_dir() + "/dup.anvil";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  EXPECT_SAYS(error_of([&] { Package::open(path); }), "dup.anvil: model.so: duplicate entry name");
}

/// The stateless test model with a constructor that creates the file named by
/// $ANVIL_TEST_LOAD_MARKER: the moment model.so's code first runs.
const std::string& marker_model_so() {
  static const std::string so = [] {
    const std::string path = temp_dir() + "/marker.so";
    const std::string marker = R"(
#include <cstdio>
#include <cstdlib>
__attribute__((constructor)) static void anvil_test_load_marker() {
  if (const char* p = std::getenv("ANVIL_TEST_LOAD_MARKER"))
    if (FILE* f = std::fopen(p, "w")) std::fclose(f);
}
)";
    codegen::build_shared_library(
        {{"kernels.cpp", kernels_source()}, {"entry.cpp", entry_source(true) + marker}}, path,
        test_toolchain_options());
    return path;
  }();
  return so;
}

TEST(PackageHostile, ModelCodeNeverRunsBeforeTheChecksPass) {
  register_test_externs();
  const std::string marker = temp_dir() + "/model_code_ran";
  ::setenv("ANVIL_TEST_LOAD_MARKER", marker.c_str(), 1);
  PackageContents c;
  c.manifest_json = test_manifest(true);
  c.model_so_path = marker_model_so();
  c.constants = {default_weight(), default_bias()};
  const std::string good = temp_dir() + "/marker_good.anvil";
  write_package(good, c);

  // Opening (what `anvil inspect` and package_device do) reads, never runs.
  ASSERT_NE(Package::open(good), nullptr);
  EXPECT_FALSE(std::filesystem::exists(marker));
  // Overlapping constants, a constant past weights.bin, an unsafe entry: refused at load with
  // the constant or entry named, before model.so is loaded.
  Pieces p = pieces_of(good);
  p.weights.resize(256, '\0');
  p.manifest["constants"][1]["offset"] = 0;
  std::string e = error_of([&] { Model::load(write_pieces(p, "marker_overlap")); });
  EXPECT_SAYS(e, "p_w: constants overlap in weights.bin");
  p = pieces_of(good);
  p.manifest["constants"][1]["offset"] = 4096;
  e = error_of([&] { Model::load(write_pieces(p, "marker_outside")); });
  EXPECT_SAYS(e, "p_b: constant lies outside weights.bin");
  p = pieces_of(good);
  p.extra = {{"src/aa", "int x;"}};  // renamed to "../xxx" below
  std::string bytes = file_bytes(write_pieces(p, "marker_name"));
  rename_entry(bytes, 3, "../xxx");
  const std::string named = temp_dir() + "/marker_name.anvil";
  std::ofstream(named, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  EXPECT_SAYS(error_of([&] { Model::load(named); }), "../xxx: unsafe entry name");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "model.so ran before the package was checked";

  // The control: loading the good package runs model.so's constructor, and the model works.
  Model m = Model::load(good);
  EXPECT_TRUE(std::filesystem::exists(marker));
  const std::vector<float> x = make_x(2);
  const std::vector<Tensor> out =
      m.run({Tensor::from_vector(x, {2, 4}), Tensor::from_vector(std::vector<float>(3, 1.f), {3})});
  EXPECT_TRUE(anvil::test::close(out[0].to_doubles(),
                                 expected_y(x, default_weight(), default_bias()), 1e-6));
  ::unsetenv("ANVIL_TEST_LOAD_MARKER");
}

}  // namespace
}  // namespace anvil::runtime::test
