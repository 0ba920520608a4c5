// ZipReader / ZipWriter: round trips in memory and on disk, alignment, lookups, CRC and
// truncation errors, ZIP64 entry counts.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/zip_reader.h"
#include "frontend/archive_util.h"

namespace anvil {
namespace {

/// Runs `f`, expecting an anvil::Error whose message contains every string in `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error raised";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks \"" << p << "\": " << e.what();
  }
}

uint32_t le32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

TEST(Crc32, KnownValues) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("a", 1), 0xE8B7BE43u);
  // Incremental use continues the same checksum.
  EXPECT_EQ(crc32("6789", 4, crc32("12345", 5)), 0xCBF43926u);
}

TEST(ZipWriter, RoundTripInMemoryWithAlignedData) {
  ZipWriter w;
  std::string big(1000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  uint64_t o1 = w.add("dir/a.txt", std::string_view("hello"));
  uint64_t o2 = w.add("dir/b.bin", big);
  uint64_t o3 = w.add("empty", std::string_view(""));
  uint64_t o4 = w.add("unaligned", std::string_view("xyz"), 1);
  std::string bytes = w.take_bytes();
  EXPECT_EQ(o1 % 64, 0u);
  EXPECT_EQ(o2 % 64, 0u);
  EXPECT_EQ(o3 % 64, 0u);
  EXPECT_EQ(bytes.substr(o1, 5), "hello");
  EXPECT_EQ(bytes.substr(o2, big.size()), big);
  EXPECT_EQ(bytes.substr(o4, 3), "xyz");
  EXPECT_EQ(le32(bytes, 0), 0x04034b50u);  // a local file header first

  ZipReader r = ZipReader::from_bytes(bytes, "mem.zip");
  EXPECT_EQ(r.name(), "mem.zip");
  ASSERT_EQ(r.entries().size(), 4u);
  EXPECT_EQ(r.entries()[1].name, "dir/b.bin");
  EXPECT_EQ(r.entries()[1].size, 1000u);
  EXPECT_TRUE(r.entries()[1].stored);
  EXPECT_EQ(r.read("dir/a.txt"), "hello");
  EXPECT_EQ(r.read("dir/b.bin"), big);
  EXPECT_EQ(r.read("empty"), "");
  EXPECT_EQ(r.read("unaligned"), "xyz");
}

TEST(ZipWriter, RoundTripOnDisk) {
  auto path = std::filesystem::temp_directory_path() / "anvil_test_zip_roundtrip.zip";
  write_zip(path.string(), {{"m/models/model.json", "{}"}, {"m/data/w", std::string(100, '\1')}});
  ZipReader r = ZipReader::open(path.string());
  EXPECT_EQ(r.name(), path.string());
  EXPECT_EQ(r.read("m/models/model.json"), "{}");
  EXPECT_EQ(r.read("m/data/w"), std::string(100, '\1'));
  std::filesystem::remove(path);
}

TEST(ZipWriter, RejectsDuplicatesAndBadAlignment) {
  ZipWriter w;
  w.add("a", std::string_view("1"));
  expect_error([&] { w.add("a", std::string_view("2")); }, {"duplicate entry", "a"});
  expect_error([&] { w.add("b", std::string_view("2"), 3); }, {"bad alignment", "3"});
  w.finish();
  expect_error([&] { w.add("c", std::string_view("3")); }, {"after finish()"});
}

TEST(ZipWriter, ManyEntriesUseZip64Directory) {
  // More than 65535 entries need the ZIP64 end-of-directory records.
  ZipWriter w;
  const int n = 70000;
  for (int i = 0; i < n; ++i) w.add("e" + std::to_string(i), std::to_string(i), 1);
  ZipReader r = ZipReader::from_bytes(w.take_bytes(), "many.zip");
  ASSERT_EQ(r.entries().size(), static_cast<size_t>(n));
  EXPECT_EQ(r.read("e0"), "0");
  EXPECT_EQ(r.read("e69999"), "69999");
}

TEST(ZipReader, FindsEntriesBySuffix) {
  ZipReader r = ZipReader::from_bytes(
      zip_bytes({{"a/models/model.json", "1"}, {"a/xmodels/other.json", "2"}, {"b/c.txt", "3"}}),
      "s.zip");
  ASSERT_NE(r.find_suffix("models/model.json"), nullptr);
  EXPECT_EQ(r.find_suffix("models/model.json")->name, "a/models/model.json");
  EXPECT_EQ(r.find_suffix("a/models/model.json")->name, "a/models/model.json");
  EXPECT_EQ(r.find_suffix("other.json")->name, "a/xmodels/other.json");
  EXPECT_EQ(r.find_suffix("models/other.json"), nullptr);  // only at a '/' boundary
  EXPECT_EQ(r.find_suffix("nothing"), nullptr);
  EXPECT_EQ(r.find("b/c.txt")->size, 1u);
  EXPECT_EQ(r.find("c.txt"), nullptr);

  ZipReader two = ZipReader::from_bytes(
      zip_bytes({{"x/models/model.json", "1"}, {"y/models/model.json", "2"}}), "two.zip");
  expect_error([&] { two.find_suffix("models/model.json"); },
               {"two.zip", "several entries", "x/models/model.json", "y/models/model.json"});
}

TEST(ZipReader, ErrorsNameArchiveAndEntry) {
  std::string bytes = zip_bytes({{"dir/data.bin", std::string(300, 'q')}, {"other", "abc"}});
  ZipReader r = ZipReader::from_bytes(bytes, "arch.zip");
  expect_error([&] { r.read("dir/missing.bin"); }, {"arch.zip: dir/missing.bin", "missing entry"});

  // A flipped data byte fails the CRC check when the entry is read.
  ZipWriter w;
  uint64_t off = w.add("dir/data.bin", std::string(300, 'q'));
  std::string bad = w.take_bytes();
  bad[off + 100] ^= 0x20;
  ZipReader rb = ZipReader::from_bytes(bad, "crc.zip");
  expect_error([&] { rb.read("dir/data.bin"); }, {"crc.zip: dir/data.bin", "corrupt"});

  // Not a zip, an empty file, a truncated archive.
  expect_error([] { ZipReader::from_bytes("definitely not a zip archive", "junk.pt2"); },
               {"junk.pt2", "cannot open zip archive"});
  expect_error([&] { ZipReader::from_bytes(bytes.substr(0, bytes.size() / 2), "half.zip"); },
               {"half.zip", "cannot open zip archive"});
  expect_error([&] { ZipReader::from_bytes(bytes.substr(0, bytes.size() - 3), "short.zip"); },
               {"short.zip", "cannot open zip archive"});
  expect_error([] { ZipReader::open("/nonexistent/dir/x.zip"); },
               {"/nonexistent/dir/x.zip", "cannot open archive"});
}

TEST(ZipReader, ReadsTheFixtureArchives) {
  ZipReader r = ZipReader::open(test::fixture_path("const_and_buffer"));
  const ZipEntry* w3 = r.find("const_and_buffer/data/weights/weight_3");
  ASSERT_NE(w3, nullptr);
  EXPECT_EQ(w3->size, 8u);
  EXPECT_EQ(r.read(*w3), std::string(8, '\0'));  // steps == 0 as int64
  EXPECT_EQ(r.read("const_and_buffer/byteorder"), "little");
  EXPECT_EQ(r.find_suffix("models/model.json")->name, "const_and_buffer/models/model.json");
}

}  // namespace
}  // namespace anvil
