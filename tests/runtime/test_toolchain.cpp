// The toolchain driver: parallel compiles, the object cache, failures, targets.
#include <dlfcn.h>

#include <filesystem>

#include "codegen/toolchain.h"
#include "common/check.h"
#include "runtime/cpu_features.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

namespace fs = std::filesystem;
using codegen::build_shared_library;
using codegen::BuildResult;
using codegen::SourceFile;

TEST(Toolchain, Sha256KnownVectors) {
  EXPECT_EQ(codegen::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(codegen::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(codegen::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(codegen::sha256_hex(std::string(1000, 'a')).substr(0, 16), "41edece42d63e8d9");
}

std::vector<SourceFile> unit_sources(int value) {
  std::vector<SourceFile> s;
  for (int i = 0; i < 4; ++i)
    s.push_back({"unit" + std::to_string(i) + ".cpp", "extern \"C\" int unit_fn" +
                                                          std::to_string(i) + "() { return " +
                                                          std::to_string(value + i) + "; }\n"});
  return s;
}

int call_symbol(const std::string& so, const char* name) {
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << ::dlerror();
  if (!h) return -1;
  auto fn = reinterpret_cast<int (*)()>(::dlsym(h, name));
  const int v = fn ? fn() : -1;
  ::dlclose(h);
  return v;
}

TEST(Toolchain, CompilesInParallelAndCachesObjects) {
  codegen::ToolchainOptions opt = test_toolchain_options("cache_hits");
  opt.jobs = 3;
  const int64_t before = codegen::compile_invocations();
  BuildResult first = build_shared_library(unit_sources(40), temp_dir() + "/units1.so", opt);
  EXPECT_EQ(first.compiled, 4);
  EXPECT_EQ(first.cached, 0);
  EXPECT_TRUE(first.linked);
  EXPECT_EQ(codegen::compile_invocations() - before, 4);
  EXPECT_EQ(call_symbol(first.so_path, "unit_fn2"), 42);

  // Same sources again: no compiler process, no link.
  const int64_t links = codegen::link_invocations();
  BuildResult second = build_shared_library(unit_sources(40), temp_dir() + "/units2.so", opt);
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.cached, 4);
  EXPECT_FALSE(second.linked);
  EXPECT_EQ(codegen::compile_invocations() - before, 4);
  EXPECT_EQ(codegen::link_invocations(), links);
  EXPECT_EQ(call_symbol(second.so_path, "unit_fn3"), 43);

  // One changed unit recompiles alone.
  std::vector<SourceFile> changed = unit_sources(40);
  changed[1].code = "extern \"C\" int unit_fn1() { return 7; }\n";
  BuildResult third = build_shared_library(changed, temp_dir() + "/units3.so", opt);
  EXPECT_EQ(third.compiled, 1);
  EXPECT_EQ(third.cached, 3);
  EXPECT_EQ(call_symbol(third.so_path, "unit_fn1"), 7);

  // Other flags are another key.
  opt.extra_flags = {"-DSOMETHING=1"};
  BuildResult fourth = build_shared_library(unit_sources(40), temp_dir() + "/units4.so", opt);
  EXPECT_EQ(fourth.compiled, 4);
  EXPECT_TRUE(fs::exists(opt.cache_dir + "/obj"));
  // Build folders are cleaned up after success.
  EXPECT_TRUE(fs::is_empty(opt.cache_dir + "/build"));
}

TEST(Toolchain, CompilerFailureCarriesMessageAndKeptSource) {
  codegen::ToolchainOptions opt = test_toolchain_options("cache_fail");
  std::vector<SourceFile> srcs = unit_sources(0);
  srcs.push_back({"broken.cpp", "int broken() { return undeclared_thing; }\n"});
  std::string message;
  try {
    build_shared_library(srcs, temp_dir() + "/broken.so", opt);
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty());
  EXPECT_NE(message.find("C++ compiler failed on broken.cpp"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;  // compiler's text
  const std::string marker = "source kept at ";
  const size_t at = message.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::string kept =
      message.substr(at + marker.size(), message.find('\n', at) - at - marker.size());
  EXPECT_TRUE(fs::exists(kept)) << kept;
  EXPECT_EQ(fs::path(kept).filename(), "broken.cpp");
  EXPECT_FALSE(fs::exists(temp_dir() + "/broken.so"));
}

TEST(Toolchain, LinkFailureIsAnError) {
  codegen::ToolchainOptions opt = test_toolchain_options("cache_link");
  std::vector<SourceFile> srcs = {
      {"a.cpp", "int missing_fn(); int f() { return missing_fn(); }\n"}};
  std::string message;
  try {
    build_shared_library(srcs, temp_dir() + "/link.so", opt);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("linking model.so failed"), std::string::npos) << message;
  EXPECT_NE(message.find("missing_fn"), std::string::npos) << message;
}

TEST(Toolchain, BadInputsAreErrors) {
  codegen::ToolchainOptions opt = test_toolchain_options("cache_bad");
  ANVIL_EXPECT_ERROR(build_shared_library({}, temp_dir() + "/none.so", opt), "nothing to compile");
  ANVIL_EXPECT_ERROR(
      build_shared_library({{"a.cpp", ""}, {"a.cpp", ""}}, temp_dir() + "/dup.so", opt),
      "duplicate source file name");
  ANVIL_EXPECT_ERROR(build_shared_library({{"../a.cpp", ""}}, temp_dir() + "/dir.so", opt),
                     "bad source file name");
  opt.compiler = "/nonexistent/anvil-no-such-compiler";
  ANVIL_EXPECT_ERROR(build_shared_library(unit_sources(1), temp_dir() + "/nocc.so", opt),
                     "cannot start the C++ compiler");
  ANVIL_EXPECT_ERROR(codegen::resolve_target("riscv-128"), "unknown compile target");
}

TEST(Toolchain, TargetsAndRuntimeFeatureNamesAgree) {
  const codegen::TargetInfo avx2 = codegen::resolve_target("x86_64-avx2");
  EXPECT_EQ(avx2.manifest_target, "cpu-x86_64-avx2");
  EXPECT_EQ(avx2.flags, (std::vector<std::string>{"-march=x86-64", "-mavx2", "-mfma"}));
  EXPECT_EQ(target_cpu_features(avx2.manifest_target), avx2.cpu_features);
  const codegen::TargetInfo avx512 = codegen::resolve_target("x86_64-avx512");
  EXPECT_EQ(target_cpu_features(avx512.manifest_target), avx512.cpu_features);
  const codegen::TargetInfo native = codegen::resolve_target("native");
  EXPECT_EQ(native.manifest_target, "cpu-x86_64-native");
  // Every feature `native` reports is known to the runtime, and this CPU has it.
  for (const std::string& f : native.cpu_features) EXPECT_TRUE(cpu_supports(f)) << f;
  EXPECT_NO_THROW(check_cpu_features(native.manifest_target, native.cpu_features, "test"));
  ANVIL_EXPECT_ERROR(cpu_supports("no-such-feature"), "unknown CPU feature");
}

TEST(Toolchain, NativeBuildOfTheTestModelLoads) {
  codegen::ToolchainOptions opt = test_toolchain_options("cache_native");
  opt.target = "native";
  BuildResult r =
      build_shared_library({{"kernels.cpp", kernels_source()}, {"entry.cpp", entry_source(true)}},
                           temp_dir() + "/native.so", opt);
  EXPECT_EQ(r.target.name, "native");
  void* h = ::dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(h, "anvil_model_entry"), nullptr);
  ::dlclose(h);
}

}  // namespace
}  // namespace anvil::runtime::test
