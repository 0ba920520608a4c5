// Parser failures: every error names the position (source:line:column), what was expected and
// what was found; unknown ops are reported together.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace anvil::irtest {
namespace {

const char* kHeader =
    "graph {\n"
    "  inputs {\n"
    "    %x: f32[2, 3] = user_input\n"
    "  }\n";

/// Parses `text`, expects an Error and returns it.
Error parse_error(const std::string& text, const ir::ParseOptions& opts = {}) {
  try {
    ir::parse_graph(text, opts);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return Error("none");
}

TEST(IrParseErrors, MissingCloseParenReportsPosition) {
  Error e = parse_error(std::string(kHeader) + "  %y: f32[2, 3] = aten.relu.default(self=%x\n}\n");
  EXPECT_EQ(e.where(), "<ir>:6:1");
  EXPECT_EQ(e.what_part(), "syntax error");
  EXPECT_EQ(e.expected(), "',' or ')' in the argument list");
  EXPECT_EQ(e.actual(), "'}'");
  EXPECT_NE(std::string(e.what()).find("<ir>:6:1: syntax error (expected ',' or ')'"),
            std::string::npos)
      << e.what();
}

TEST(IrParseErrors, SourceNameAppearsInLocation) {
  ir::ParseOptions opts;
  opts.source_name = "model.ir";
  Error e = parse_error("graph {\n  %y = \n}", opts);
  EXPECT_EQ(e.where(), "model.ir:2:6");
  EXPECT_EQ(e.expected(), "':' and the type of %y");
}

TEST(IrParseErrors, EmptyTextAndTrailingText) {
  Error e = parse_error("");
  EXPECT_EQ(e.where(), "<ir>:1:1");
  EXPECT_EQ(e.expected(), "'graph'");
  EXPECT_EQ(e.actual(), "end of input");
  e = parse_error("graph {\n}\nextra");
  EXPECT_EQ(e.where(), "<ir>:3:1");
  EXPECT_EQ(e.actual(), "'extra'");
  e = parse_error("graph {\n  inputs {\n");
  EXPECT_EQ(e.where(), "<ir>:3:1");
  EXPECT_EQ(e.actual(), "end of input");
}

TEST(IrParseErrors, UnknownDtype) {
  Error e = parse_error("graph {\n  inputs {\n    %x: float32x[2] = user_input\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:3:9");
  EXPECT_EQ(e.actual(), "'float32x'");
  EXPECT_NE(e.expected().find("a dtype such as f32"), std::string::npos);
}

TEST(IrParseErrors, BadSymbolicSize) {
  Error e = parse_error("graph {\n  inputs {\n    %x: f32[s0 +, 2] = user_input\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:3:13");
  EXPECT_EQ(e.actual(), "'s0 +'");
  EXPECT_NE(e.what_part().find("bad symbolic expression"), std::string::npos);
}

TEST(IrParseErrors, UnknownOpsAreListedTogether) {
  Error e = parse_error(std::string(kHeader) +
                        "  %a: f32[2, 3] = aten.foo.default(self=%x)\n"
                        "  %b: f32[2, 3] = aten.relu.default(self=%a)\n"
                        "  %c: f32[2, 3] = my.bar(self=%b)\n"
                        "  %d: f32[2, 3] = aten.foo.default(self=%c)\n"
                        "}\n");
  EXPECT_EQ(e.what_part(), "graph uses 2 op(s) not in the op table");
  EXPECT_EQ(e.actual(), "aten.foo.default x2 (first at <ir>:5:19), my.bar x1 (first at <ir>:7:19)");
  // allow_unknown_ops keeps them with a null schema.
  ir::ParseOptions opts;
  opts.allow_unknown_ops = true;
  auto g = ir::parse_graph(
      std::string(kHeader) + "  %a: f32[2, 3] = aten.foo.default(self=%x)\n}\n", opts);
  EXPECT_EQ(g->nodes()[0]->schema, nullptr);
}

TEST(IrParseErrors, ValueNeverDefined) {
  Error e = parse_error(std::string(kHeader) +
                        "  %y: f32[2, 3] = aten.add.Tensor(self=%x, other=%nope)\n"
                        "  outputs {\n    user_output %y\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:50");
  EXPECT_EQ(e.what_part(), "undefined value");
  EXPECT_EQ(e.actual(), "%nope (used but never defined)");
  e = parse_error(std::string(kHeader) + "  outputs {\n    user_output %z\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:6:17");
  EXPECT_EQ(e.what_part(), "undefined value");
  EXPECT_EQ(e.actual(), "%z (used but never defined)");
}

TEST(IrParseErrors, ValueDefinedTwice) {
  Error e = parse_error(std::string(kHeader) +
                        "  %y: f32[2, 3] = aten.relu.default(self=%x)\n"
                        "  %y: f32[2, 3] = aten.relu.default(self=%x)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:6:3");
  EXPECT_EQ(e.actual(), "%y (defined twice)");
  e = parse_error(
      "graph {\n  inputs {\n    %x: f32[] = user_input\n    %x: f32[] = user_input\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:4:5");
  EXPECT_EQ(e.actual(), "%x (defined twice)");
}

TEST(IrParseErrors, SectionsOutOfOrder) {
  Error e = parse_error("graph {\n  outputs {\n  }\n  inputs {\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:4:3");
  EXPECT_EQ(e.actual(), "'inputs' here");
  e = parse_error(std::string(kHeader) +
                  "  outputs {\n  }\n  %y: f32[2, 3] = aten.relu.default(self=%x)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:7:3");
  EXPECT_EQ(e.expected(), "'}' (nodes come before the outputs section)");
}

TEST(IrParseErrors, LiteralsOutOfRangeOrMalformed) {
  std::string node = "  aten._assert_tensor_metadata.default(a=%x, ";
  Error e = parse_error(std::string(kHeader) + node + "dtype=99999999999999999999)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:52");
  EXPECT_EQ(e.actual(), "'99999999999999999999' (out of range)");
  e = parse_error(std::string(kHeader) + node + "dtype=\"abc)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:52");
  EXPECT_EQ(e.actual(), "an unterminated string");
  e = parse_error(std::string(kHeader) + node + "dtype=\"a\\qb\")\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:54");
  EXPECT_NE(e.expected().find("an escape"), std::string::npos) << e.what();
  EXPECT_EQ(e.actual(), "'qb'");
  e = parse_error(std::string(kHeader) + node + "dtype=f99)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:52");
  EXPECT_EQ(e.actual(), "'f99'");
  e = parse_error(std::string(kHeader) + node + "dtype=12abc)\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:52");
  EXPECT_EQ(e.expected(), "a number");
  EXPECT_EQ(e.actual(), "'12abc'");
  e = parse_error(std::string(kHeader) + node + "device=device(tpu))\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:60");
  EXPECT_EQ(e.expected(), "a device: cpu, cpu:N, cuda or cuda:N");
}

TEST(IrParseErrors, MixedListsNeedSymIntTag) {
  Error e = parse_error(std::string(kHeader) +
                        "  %v: f32[6] = aten.view.default(self=%x, size=[%x, 6])\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:48");
  EXPECT_EQ(e.actual(), "a mixed list");
  EXPECT_NE(e.expected().find("SymInt[...]"), std::string::npos);
  e = parse_error(std::string(kHeader) +
                  "  %v: f32[6] = aten.view.default(self=%x, size=SymInt[%x, 1.5])\n}\n");
  EXPECT_EQ(e.where(), "<ir>:5:59");
  EXPECT_EQ(e.actual(), "'1.5'");
}

TEST(IrParseErrors, BadSignatureKinds) {
  Error e = parse_error("graph {\n  inputs {\n    %x: f32[] = weight\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:3:17");
  EXPECT_EQ(e.actual(), "'weight'");
  EXPECT_NE(e.expected().find("user_input"), std::string::npos);
  e = parse_error(std::string(kHeader) + "  outputs {\n    result %x\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:6:5");
  EXPECT_EQ(e.actual(), "'result'");
  e = parse_error("graph {\n  symbols {\n    s0 in [1, many]\n  }\n}\n");
  EXPECT_EQ(e.where(), "<ir>:3:15");
  EXPECT_EQ(e.expected(), "an integer bound, inf or -inf");
}

}  // namespace
}  // namespace anvil::irtest

namespace anvil::irtest {
namespace {

const char* kFuzzSeed = R"(graph {
  symbols {
    s0 in [1, 8]
  }
  inputs {
    %w: f32[4, 3] = parameter "w"
    %x: f32[s0, 3] = user_input
  }
  %n: SymInt(s0) = aten.sym_size.int(self=%x, dim=0)
  %l: f32[s0, 4] = aten.linear.default(input=%x, weight=%w)
  %v: f32[s0, 2, 2] = aten.view.default(self=%l, size=SymInt[%n, 2, 2])
  ^u: [%a: f32[s0, 2], _] = aten.unbind.int(self=%v, dim=1)
  %c: f32[2*s0, 2] = aten.cat.default(tensors=[%a, %a], dim=0)
  %i: f32[s0, 4] = aten.index.Tensor(self=%l, indices=Tensor?[None, %a])
  %z: f32[s0, 4]{1, s0} = aten.mul.Tensor(self=%l, other=0.5)
  %t: bf16[s0, 4]@cuda:0 = aten.to.dtype_layout(self=%z, *dtype=bf16, *layout=torch.strided)
  %r: i64[8] = aten.arange.default(end=8, *dtype=i64, *device=device(cpu), *pin_memory=False)
  aten._assert_tensor_metadata.default(a=%r, *dtype=i64, *device=device(cpu))
  %g: f32[s0, 4] = aten.gelu.default(self=%l, approximate="tanh\n")
  outputs {
    user_output %c
    user_output %t
  }
}
)";

TEST(IrParseErrors, MutatedTextNeverCrashes) {
  // Deterministic mutations (delete, duplicate, replace with a token character, truncate): the
  // parser and, when parsing succeeds, the printer and verifier either work or throw Error.
  const std::string seed = kFuzzSeed;
  ASSERT_NO_THROW(ir::parse_graph(seed));
  const std::string chars = "%[](){}:,=\"\\_*^@-.0123456789 \n#?sxe";
  uint64_t state = 12345;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 17) % n);
  };
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = seed;
    for (int m = 0, count = 1 + static_cast<int>(next(3)); m < count; ++m) {
      if (text.empty()) break;
      size_t at = next(text.size());
      switch (next(4)) {
        case 0:
          text.erase(at, 1);
          break;
        case 1:
          text.insert(at, 1, text[at]);
          break;
        case 2:
          text[at] = chars[next(chars.size())];
          break;
        default:
          text.resize(at);
          break;
      }
    }
    try {
      auto g = ir::parse_graph(text);
      ++parsed;
      std::string again = ir::print_graph(*g);
      EXPECT_EQ(ir::print_graph(*ir::parse_graph(again)), again);
      try {
        ir::verify(*g);
      } catch (const Error&) {
      }
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-Error exception " << e.what() << " for:\n" << text;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace anvil::irtest
