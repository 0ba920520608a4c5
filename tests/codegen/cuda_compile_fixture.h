// The fixture the CUDA target's compile tests share: a fresh folder per test (named after the
// suite, the process and the test) and compile options for cuda-sm90 with a cache inside it,
// removed after the test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "driver/compile.h"

namespace anvil::test {

class CudaCompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("anvil_" + std::string(info->test_suite_name()) + "_" + std::to_string(::getpid()) +
            "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    opts_.target = "cuda-sm90";
    opts_.cache_dir = (dir_ / "cache").string();
    opts_.progress = codegen::ProgressMode::kQuiet;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
  driver::CompileOptions opts_;
};

}  // namespace anvil::test
