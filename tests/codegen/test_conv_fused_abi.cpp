// A package whose convolutions carry a fused activation (attribute fused_act) needs a runtime of
// ABI minor 9 or later: an older one ignores unknown extern attributes and would skip the
// activation silently, so the generated create() refuses it (the runtime then names the ABI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "driver/compile.h"
#include "ir/parser.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

std::string model_source(const std::string& name, const std::string& act) {
  const fs::path dir =
      fs::temp_directory_path() / ("anvil_conv_abi_" + std::to_string(::getpid())) / name;
  driver::CompileOptions o;
  o.cache_dir = (dir / "cache").string();
  o.progress = codegen::ProgressMode::kQuiet;
  o.emit_source_dir = (dir / "src").string();
  const auto g = ir::parse_graph(
      "graph {\n  inputs {\n    %x: f32[1, 2, 6, 6] = user_input\n"
      "    %w: f32[4, 2, 3, 3] = user_input\n    %b: f32[4] = user_input\n  }\n"
      "  %y: f32[1, 4, 4, 4] = aten.convolution.default(input=%x, weight=%w, bias=%b, "
      "stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False, output_padding=[0, 0], "
      "groups=1)\n" +
      act + "  outputs {\n    user_output %" + (act.empty() ? "y" : "a") + "\n  }\n}\n");
  driver::compile_graph(*g, (dir / "m.anvil").string(), o);
  std::string text;
  for (const char* file : {"model.cpp", "kernels_0.cpp"}) {
    std::ifstream f(dir / "src" / file);
    text += std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  return text;
}

TEST(ConvFusedAbi, AFusedActivationNeedsAbiMinor9) {
  const std::string fused =
      model_source("hardswish", "  %a: f32[1, 4, 4, 4] = aten.hardswish.default(self=%y)\n");
  EXPECT_NE(fused.find("fused_act"), std::string::npos) << "the activation is fused";
  EXPECT_NE(fused.find("abi_minor_version < 9"), std::string::npos);
  const std::string plain = model_source("plain", "");
  EXPECT_EQ(plain.find("abi_minor_version < 9"), std::string::npos);
  fs::remove_all(fs::temp_directory_path() / ("anvil_conv_abi_" + std::to_string(::getpid())));
}

}  // namespace
}  // namespace anvil
