// Hostile zip archives (built byte by byte here): unsafe entry names, symlink and device
// entries, sizes the file cannot hold, zip bombs, local headers that disagree with the central
// directory, overlapping entries. read_zip_directory and ZipReader (from bytes and from a file)
// refuse each with an error naming the archive and the entry, before reading or allocating.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <new>

#include "common/hostile_zip.h"
#include "core/error.h"
#include "core/zip_directory.h"
#include "core/zip_reader.h"

namespace anvil::test {
namespace {

/// The message of the Error `fn` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool says(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

/// Writes `bytes` to a fresh file; returns its path.
std::string write_temp(const std::string& bytes, const std::string& name) {
  const std::string path = "/tmp/anvil_zipdir_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

/// Every way in: the directory parser, ZipReader over bytes and over a file. Each must refuse
/// `zip` with a message holding every one of `parts`.
void expect_refused(const std::string& zip, const std::vector<std::string>& parts) {
  const std::string path = write_temp(zip, "hostile.zip");
  const std::vector<std::string> errors = {
      error_of([&] { read_zip_directory(zip, "hostile.zip"); }),
      error_of([&] { ZipReader::from_bytes(zip, "hostile.zip"); }),
      error_of([&] { ZipReader::open(path); })};
  std::remove(path.c_str());
  for (const std::string& e : errors)
    for (const std::string& part : parts)
      EXPECT_TRUE(says(e, part)) << "'" << part << "' in: " << e;
}

/// Raw deflate (no zlib header) of `data`, as zip stores it.
std::string deflate_raw(const std::string& data) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, data.size()), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

TEST(ZipDirectory, EntryNameRules) {
  for (const char* ok : {"a", "archive/data/weights/w0", "dir/", "x.y/z-1_2", "..a/b..", "a/.b"})
    EXPECT_EQ(zip_entry_name_problem(ok), "") << ok;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "an empty name"},
      {"../evil", "a '..' component"},
      {"a/../../evil", "a '..' component"},
      {"a/..", "a '..' component"},
      {"/etc/passwd", "an absolute path"},
      {"a\\..\\evil", "a backslash"},
      {std::string("ok\0.so", 6), "a NUL byte"},
      {"C:evil", "a drive letter"},
      {"./a", "a '.' component"},
      {"a//b", "an empty component"},
      {"a\nb", "a control character"},
  };
  for (const auto& [name, problem] : bad) EXPECT_EQ(zip_entry_name_problem(name), problem) << name;
  const std::string e = error_of([] { check_zip_entry_name(std::string("a\0b", 3), "x.zip"); });
  EXPECT_TRUE(says(e, "x.zip: a\\x00b: unsafe entry name: it has a NUL byte")) << e;
}

TEST(ZipDirectory, UnsafeNamesAreRefusedWhereverTheArchiveIsRead) {
  // A well-formed archive around each name: only the name is wrong.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"../../../tmp/evil", "a '..' component"},
      {"/tmp/anvil_evil", "an absolute path"},
      {"..\\..\\evil", "a backslash"},
      {std::string("model.json\0../x", 15), "a NUL byte"},
  };
  for (const auto& [name, problem] : bad) {
    const std::string zip = raw_zip({{"fine.txt", "ok"}, {name, "payload"}});
    std::string shown = name;
    for (size_t i = 0; i < shown.size(); ++i)
      if (shown[i] == '\0')
        shown.replace(i, 1, "\\x00");
      else if (shown[i] == '\\')
        shown.replace(i++, 1, "\\x5c");
    expect_refused(zip, {"hostile.zip: " + shown, "unsafe entry name: it has " + problem});
  }
  // ZipWriter never writes one.
  ZipWriter w;
  EXPECT_TRUE(says(error_of([&] { w.add("../x", "1"); }), "unsafe entry name"));
  // The same archive with a safe name opens and reads.
  ZipReader r = ZipReader::from_bytes(raw_zip({{"fine.txt", "ok"}, {"a/b", "payload"}}), "ok.zip");
  EXPECT_EQ(r.read("a/b"), "payload");
}

TEST(ZipDirectory, SymlinksAndDevicesAreRefused) {
  const uint16_t unix_host = (3 << 8) | 30;
  RawEntry link{"models/model.json", "/etc/passwd"};
  link.made_by = unix_host;
  link.external = 0120777u << 16;
  expect_refused(raw_zip({link}), {"hostile.zip: models/model.json",
                                   "symlink entries are not allowed", "a symbolic link"});
  RawEntry device{"dev", ""};
  device.made_by = unix_host;
  device.external = 0020644u << 16;
  expect_refused(raw_zip({device}),
                 {"hostile.zip: dev", "special file entries are not allowed", "file mode 020000"});
  // Regular files and folders with Unix modes are fine.
  RawEntry file{"d/f", "data"}, folder{"d/", ""};
  file.made_by = folder.made_by = unix_host;
  file.external = 0100644u << 16;
  folder.external = 0040755u << 16;
  EXPECT_EQ(ZipReader::from_bytes(raw_zip({folder, file}), "ok.zip").read("d/f"), "data");
}

TEST(ZipDirectory, DeclaredSizesTheFileCannotHoldAreRefused) {
  // A stored entry declaring 2^60 bytes (ZIP64 fields) in a file of a hundred bytes.
  RawEntry huge{"w", "tiny"};
  huge.size = uint64_t{1} << 60;
  expect_refused(raw_zip({huge}), {"hostile.zip: w", "stored entry's sizes disagree",
                                   "1152921504606846976 declared"});
  // Stored sizes that agree but run past the end of the file.
  std::string past = raw_zip({{"w", "tiny"}});
  for (size_t at : {central_record(past, 0) + 20, central_record(past, 0) + 24,
                    local_header(past, 0) + 18, local_header(past, 0) + 22})
    put_le(past, at, 0x7FFFFFF0u, 4);
  expect_refused(past, {"hostile.zip: w", "runs into the central directory"});
  // A deflated entry claiming more than deflate can produce: a zip bomb's header.
  RawEntry bomb{"models/model.json", deflate_raw(std::string(4096, 'x'))};
  bomb.method = 8;
  bomb.size = uint64_t{1} << 40;
  expect_refused(raw_zip({bomb}), {"hostile.zip: models/model.json",
                                   "implausible uncompressed size (a zip bomb?)", "1099511627776"});
  // An honest 1 MiB of zeros deflated ~1000:1 is read back exactly.
  const std::string zeros(1 << 20, '\0');
  RawEntry honest{"z", deflate_raw(zeros)};
  honest.method = 8;
  honest.size = zeros.size();
  honest.crc = crc32(zeros.data(), zeros.size());
  EXPECT_EQ(ZipReader::from_bytes(raw_zip({honest}), "ok.zip").read("z"), zeros);
  // Methods other than stored and deflate.
  RawEntry bzip{"b", "BZh9"};
  bzip.method = 12;
  expect_refused(raw_zip({bzip}), {"hostile.zip: b", "unsupported compression method"});
}

TEST(ZipDirectory, HugeDeclaredSizesAreNeverAllocated) {
  // In a child whose address space is capped at what it already uses plus 256 MiB, opening
  // and reading tiny archives that declare 2^40..2^60 bytes must end in anvil::Error, not in a
  // failed allocation. (ASan reserves terabytes of shadow memory: there the cap is left off.)
  RawEntry bomb{"m", deflate_raw("abc")}, stored{"w", "tiny"};
  bomb.method = 8;
  bomb.size = uint64_t{1} << 40;
  stored.size = uint64_t{1} << 60;
  const std::vector<std::string> archives = {raw_zip({bomb}), raw_zip({stored})};
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
#if defined(__SANITIZE_ADDRESS__)  // gcc
#define ANVIL_UNDER_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define ANVIL_UNDER_ASAN 1
#endif
#endif
#if !defined(ANVIL_UNDER_ASAN)
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * ::sysconf(_SC_PAGESIZE) + (rlim_t{256} << 20);
    const rlimit lim{cap, cap};
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    try {  // the cap works: 1 GiB cannot be had
      volatile char* big = new char[size_t{1} << 30];
      big[0] = 1;
      ::_exit(4);
    } catch (const std::bad_alloc&) {
    }
#endif
    for (const std::string& a : archives) {
      try {
        ZipReader r = ZipReader::from_bytes(a, "tiny.zip");
        (void)r.read(r.entries().at(0));
        ::_exit(1);  // no error at all
      } catch (const Error& e) {
        if (!says(e.what(), "tiny.zip")) ::_exit(1);
      } catch (const std::bad_alloc&) {
        ::_exit(2);
      } catch (...) {
        ::_exit(1);
      }
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no anvil::Error, 2: allocation failed, 3/4: no cap";
}

TEST(ZipDirectory, LocalHeadersMustAgreeWithTheCentralDirectory) {
  const std::string good = raw_zip({{"models/model.json", "{}"}, {"data/w", "12345678"}});
  ASSERT_EQ(read_zip_directory(good, "ok.zip").size(), 2u);
  // The local name differs (a reader that trusts local headers would see another file).
  std::string renamed = good;
  renamed.replace(local_header(renamed, 1) + 30, 6, "data/x");
  expect_refused(renamed, {"hostile.zip: data/w",
                           "local header disagrees with the central directory", "name 'data/x'"});
  // The local header declares a huge size where the central directory declares 8 bytes.
  std::string bigger = good;
  put_le(bigger, local_header(bigger, 1) + 22, 0x7FFFFFFFu, 4);
  expect_refused(bigger, {"hostile.zip: data/w", "local header disagrees", "2147483647 bytes"});
  // Another compression method.
  std::string method = good;
  put_le(method, local_header(method, 0) + 8, 8, 2);
  expect_refused(
      method, {"hostile.zip: models/model.json", "local header disagrees", "compression method 0"});
  // No local header where the central directory points.
  std::string moved = good;
  put_le(moved, central_record(moved, 1) + 42, 3, 4);
  expect_refused(moved, {"hostile.zip: data/w", "no local header at offset 3"});
}

TEST(ZipDirectory, OverlappingEntriesAreRefused) {
  // The first entry's sizes are stretched (in both headers) over the second entry: the
  // overlapping-files trick of non-recursive zip bombs.
  std::string z = raw_zip({{"a", "first"}, {"b", "second"}});
  const uint64_t stretched = local_header(z, 1) + 31 + 6 - (local_header(z, 0) + 31);
  for (size_t at : {central_record(z, 0) + 20, central_record(z, 0) + 24, local_header(z, 0) + 18,
                    local_header(z, 0) + 22})
    put_le(z, at, stretched, 4);
  expect_refused(z, {"hostile.zip: b", "entries overlap", "where 'a' ends"});
  // Two central records for one local header.
  std::string twice = raw_zip({{"a", "first"}, {"a", "again"}});
  put_le(twice, central_record(twice, 1) + 42, 0, 4);
  const std::string e = error_of([&] { read_zip_directory(twice, "hostile.zip"); });
  EXPECT_TRUE(says(e, "hostile.zip: a")) << e;
  EXPECT_TRUE(says(e, "disagrees") || says(e, "duplicate entry name") || says(e, "overlap")) << e;
  // Duplicate names at distinct offsets.
  expect_refused(raw_zip({{"a", "first"}, {"a", "again"}}),
                 {"hostile.zip: a", "duplicate entry name"});
}

}  // namespace
}  // namespace anvil::test
