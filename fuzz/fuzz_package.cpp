// libFuzzer target: the .anvil package reader (runtime/package.h): the zip directory checks,
// manifest.json's parse and validation (runtime/manifest.cpp), weights.bin's alignment and the
// constants' ranges. Inputs are archive bytes or the structured entry list of fuzz_util.h (the
// harness then zips them with correct CRCs, weights.bin aligned as write_package aligns it).
// The bytes go to a memfd that Package::open maps as it maps a file. An opened package must
// hold every constant inside weights.bin, and each must read in full.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_util.h"
#include "runtime/package.h"

namespace {

/// The memfd the archive bytes go to, and its /proc path.
struct MemFile {
  int fd = ::memfd_create("anvil_fuzz_package", 0);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string bytes;
  try {
    bytes = anvil::fuzz::archive_bytes(
        input, [](const std::string& name) { return name == "weights.bin" ? 4096 : 1; });
  } catch (const anvil::Error&) {
    return 0;  // an entry name no archive may hold (the zip writer refuses it)
  }
  if (::ftruncate(file.fd, 0) != 0 ||
      ::pwrite(file.fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    anvil::fuzz::fail_property("cannot write the memfd");
  std::shared_ptr<anvil::runtime::Package> pkg;
  try {
    pkg = anvil::runtime::Package::open(file.path);
  } catch (const anvil::Error&) {
    return 0;
  }
  const auto& constants = pkg->manifest().constants;
  for (size_t i = 0; i < constants.size(); ++i) {
    const auto& c = constants[i];
    if (c.offset > pkg->weights().size() || c.nbytes > pkg->weights().size() - c.offset)
      anvil::fuzz::fail_property("constant " + c.name + " lies outside weights.bin");
    anvil::Tensor t = pkg->constant(i);
    if (t.numel() > 0) (void)t.clone();  // manifest.cpp checked nbytes = the bytes it reaches
  }
  for (const std::string& name : pkg->source_names()) (void)pkg->source(name);
  return 0;
}
