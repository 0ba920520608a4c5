// Tests for SymInt: folding, canonical equality, evaluation, bounds, text round trip, and the
// sympy srepr strings torch.export writes into model.json.
#include <gtest/gtest.h>

#include "common/check.h"
#include "core/error.h"
#include "core/symint.h"

namespace anvil {
namespace {

const SymInt s0 = SymInt::symbol("s0");
const SymInt s1 = SymInt::symbol("s1");
constexpr int64_t kInf = SymRange::kSymMax;

TEST(SymInt, ConstantsFold) {
  SymInt a = SymInt(3) + SymInt(4) * SymInt(5);
  EXPECT_TRUE(a.is_constant());
  EXPECT_EQ(a.constant(), 23);
  EXPECT_EQ(SymInt(7).floordiv(2).constant(), 3);
  EXPECT_EQ(SymInt(-7).floordiv(2).constant(), -4);  // Python floor division
  EXPECT_EQ(SymInt(7).floordiv(-2).constant(), -4);
  EXPECT_EQ(SymInt(-7).mod(3).constant(), 2);  // Python modulo
  EXPECT_EQ(SymInt(7).mod(-3).constant(), -2);
  EXPECT_EQ(SymInt::max(3, 9).constant(), 9);
  EXPECT_EQ(SymInt::min(3, 9).constant(), 3);
  EXPECT_EQ((-SymInt(5)).constant(), -5);
  EXPECT_EQ(SymInt(5).maybe_constant(), 5);
  EXPECT_EQ(s0.maybe_constant(), std::nullopt);
  ANVIL_EXPECT_ERROR(s0.constant(), "size is symbolic, not a constant");
  ANVIL_EXPECT_ERROR(SymInt(1).floordiv(0), "SymInt::floordiv: division by zero");
  ANVIL_EXPECT_ERROR(SymInt(1).mod(0), "SymInt::mod: division by zero");
  ANVIL_EXPECT_ERROR(s0.floordiv(0), "SymInt::floordiv: division by zero");
  ANVIL_EXPECT_ERROR(SymInt(std::numeric_limits<int64_t>::max()) + SymInt(1),
                     "integer overflow in a symbolic size");
  ANVIL_EXPECT_ERROR(SymInt(std::numeric_limits<int64_t>::min()).floordiv(-1),
                     "SymInt::floordiv: integer overflow");
}

TEST(SymInt, IdentitiesAndLikeTerms) {
  EXPECT_EQ(s0 + 0, s0);
  EXPECT_EQ(s0 * 1, s0);
  EXPECT_EQ(s0 * 0, SymInt(0));
  EXPECT_EQ(s0 - s0, SymInt(0));
  EXPECT_EQ(s0 + s0, s0 * 2);
  EXPECT_EQ((s0 + s0).str(), "2*s0");
  EXPECT_EQ(s0 + 1 + s1, s1 + (s0 + 1));
  EXPECT_EQ((s1 + 1 + s0).str(), "s0 + s1 + 1");
  EXPECT_EQ(s0 * s1, s1 * s0);
  EXPECT_EQ((s0 * 3 * s1 * 2).str(), "6*s0*s1");
  EXPECT_EQ((s0 * 3 - s0 * 3 + 5).constant(), 5);
  EXPECT_EQ((s0 - 3).str(), "s0 - 3");
  EXPECT_NE(s0, s1);
  EXPECT_NE(s0, SymInt(0));
  EXPECT_EQ(s0.as_symbol(), "s0");
  EXPECT_EQ((s0 + 1).as_symbol(), std::nullopt);
}

TEST(SymInt, NumbersDistributeOverSumsLikeSympy) {
  EXPECT_EQ((s0 + 1) * 2, s0 * 2 + 2);
  EXPECT_EQ(((s0 + 1) * 2).str(), "2*s0 + 2");
  EXPECT_EQ((s0 + 1) - (s0 + 1), SymInt(0));
  EXPECT_EQ(-(s0 - s1), s1 - s0);
  EXPECT_EQ((s0 + s1) * 3 - s1 * 3, s0 * 3);
}

TEST(SymInt, EqualFactorsBecomePowers) {
  EXPECT_EQ(s0 * s0, SymInt::parse("Pow(Symbol('s0', positive=True, integer=True), Integer(2))"));
  EXPECT_EQ((s0 * s0).str(), "Pow(s0, 2)");
  EXPECT_EQ(s0 * s0 * s0, SymInt::parse("s0**3"));
  EXPECT_EQ((s0 * 2) * (s0 * 3), SymInt::parse("6*s0**2"));
  EXPECT_EQ(SymInt::parse("s0**2").evaluate({{"s0", 7}}), 49);
  EXPECT_EQ(SymInt::parse("s0**0"), SymInt(1));
  EXPECT_EQ(SymInt::parse("2**10").constant(), 1024);
}

TEST(SymInt, FloorDivAndModSimplify) {
  EXPECT_EQ((s0 * 4).floordiv(2), s0 * 2);
  EXPECT_EQ((s0 * 2 + 4).floordiv(2), s0 + 2);
  EXPECT_EQ(s0.floordiv(1), s0);
  EXPECT_EQ(s0.floordiv(2).str(), "FloorDiv(s0, 2)");
  EXPECT_EQ((s0 + 4).floordiv(2), s0.floordiv(2) + 2);            // whole multiples come out
  EXPECT_EQ((s0 * 4 + 2).floordiv(6), (s0 * 2 + 1).floordiv(3));  // common factors cancel
  EXPECT_EQ((s0 * 6).mod(3), SymInt(0));
  EXPECT_EQ((s0 + s1 * 4 + 5).mod(4), (s0 + 1).mod(4));
  EXPECT_EQ((s0 * 4 + 5).mod(4), SymInt(1));
  EXPECT_EQ(s0.mod(1), SymInt(0));
  EXPECT_EQ(s0.mod(4).str(), "Mod(s0, 4)");
  // Results agree with plain evaluation for a spread of values.
  const SymInt exprs[] = {(s0 * 2 + 4).floordiv(2), (s0 + 4).floordiv(2),
                          (s0 * 4 + 2).floordiv(6), (s0 * 4 + 2).floordiv(-6),
                          (s0 + s1 * 4 + 5).mod(4), (s0 * 3 + 1).mod(-2)};
  auto py_div = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
  for (int64_t v = -9; v <= 9; ++v) {
    SymEnv env{{"s0", v}, {"s1", 3}};
    EXPECT_EQ(exprs[0].evaluate(env), py_div(2 * v + 4, 2));
    EXPECT_EQ(exprs[1].evaluate(env), py_div(v + 4, 2));
    EXPECT_EQ(exprs[2].evaluate(env), py_div(4 * v + 2, 6));
    EXPECT_EQ(exprs[3].evaluate(env), py_div(4 * v + 2, -6));
    EXPECT_EQ(exprs[4].evaluate(env), (v + 17) - py_div(v + 17, 4) * 4);
    EXPECT_EQ(exprs[5].evaluate(env), (3 * v + 1) - py_div(3 * v + 1, -2) * -2);
  }
}

TEST(SymInt, MaxMin) {
  EXPECT_EQ(SymInt::max(s0, s0), s0);
  EXPECT_EQ(SymInt::max(s0, 4), SymInt::max(4, s0));
  EXPECT_EQ(SymInt::max(s0, 4).str(), "Max(4, s0)");
  EXPECT_EQ(SymInt::min(s1, s0).str(), "Min(s0, s1)");
  EXPECT_EQ(SymInt::max(s0, 4).evaluate({{"s0", 2}}), 4);
  EXPECT_EQ(SymInt::min(s0, 4).evaluate({{"s0", 2}}), 2);
}

TEST(SymInt, Evaluate) {
  SymInt e = s0 * 2 + 1;
  EXPECT_EQ(e.evaluate({{"s0", 5}}), 11);
  EXPECT_EQ((s0 * s1 - 3).evaluate({{"s0", 4}, {"s1", 6}}), 21);
  EXPECT_EQ(SymInt(9).evaluate({}), 9);
  try {
    (s0 + s1).evaluate({{"s0", 1}});
    FAIL();
  } catch (const Error& e2) {
    EXPECT_NE(e2.expected().find("s1"), std::string::npos);
  }
  EXPECT_EQ(evaluate_shape({s0, 256, s0 * 2}, {{"s0", 3}}), (std::vector<int64_t>{3, 256, 6}));
  EXPECT_EQ(sym_shape_str({s0, 256}), "[s0, 256]");
  ANVIL_EXPECT_ERROR(SymInt::symbol(""), "empty symbol name");
  ANVIL_EXPECT_ERROR((s0 * s0).evaluate({{"s0", int64_t{1} << 40}}),
                     "integer overflow in a symbolic size");  // overflow
}

TEST(SymInt, Bounds) {
  SymRanges r{{"s0", {2, 64}}, {"s1", {1, kInf}}};
  EXPECT_EQ((s0 * 2 + 1).bounds(r), (SymRange{5, 129}));
  EXPECT_EQ(s0.floordiv(2).bounds(r), (SymRange{1, 32}));
  EXPECT_EQ(s0.mod(4).bounds(r), (SymRange{0, 3}));
  EXPECT_EQ(s0.mod(100).bounds(r), (SymRange{0, 64}));
  EXPECT_EQ((s0 * s1).bounds(r), (SymRange{2, kInf}));
  EXPECT_EQ((-s1).bounds(r), (SymRange{-kInf, -1}));
  EXPECT_EQ((s0 - s1).bounds(r), (SymRange{-kInf, 63}));
  EXPECT_EQ((s1 - s1 * 2).bounds(r), (SymRange{-kInf, -1}));  // folds to -s1
  EXPECT_EQ((SymInt::symbol("u0") - s1).bounds(r), (SymRange{-kInf, kInf}));
  EXPECT_EQ(SymInt::max(s0, 10).bounds(r), (SymRange{10, 64}));
  EXPECT_EQ(SymInt::min(s0 * 16, s0 * 32).bounds(r), (SymRange{32, 1024}));
  EXPECT_EQ((s0 * s0).bounds(r), (SymRange{4, 4096}));
  EXPECT_EQ((s0 - 10).floordiv(4).bounds(r), (SymRange{-2, 13}));
  EXPECT_EQ(SymInt(7).bounds(r), (SymRange{7, 7}));
  EXPECT_EQ(SymInt::symbol("u0").bounds(r), (SymRange{0, kInf}));  // unknown: [0, inf]
  EXPECT_EQ((SymRange{2, kInf}).str(), "[2, inf]");
  EXPECT_EQ((SymRange{-kInf, 3}).str(), "[-inf, 3]");
  EXPECT_EQ((SymRange{1, 64}).str(), "[1, 64]");
  EXPECT_TRUE((SymRange{1, 64}).contains(64));
  EXPECT_FALSE((SymRange{1, 64}).contains(0));
}

TEST(SymInt, CollectSymbols) {
  std::set<std::string> names;
  (s0 * 2 + SymInt::max(s1, 3).floordiv(2)).collect_symbols(names);
  EXPECT_EQ(names, (std::set<std::string>{"s0", "s1"}));
}

TEST(SymInt, StrParseRoundTrip) {
  const SymInt exprs[] = {
      s0,
      SymInt(42),
      SymInt(-3),
      s0 * 2 + 1,
      s0 - 3,
      -s0,
      -s0 + 3,
      s0 * -2 + s1,
      s0 * s1 * 6,
      (s0 + 1) * s1,
      s0.floordiv(2),
      s0.floordiv(2) * 3 + 1,
      (s0 + 1).floordiv(s1),
      s0.mod(4),
      SymInt::max(s0, 4) * 2,
      SymInt::min(s0 * 16, s0 * 32),
      s0 * s0 * s1,
      (s0 + 1) * (s0 + 1),
      SymInt::max(s0 - 1, 0).floordiv(3) - s1,
  };
  for (const SymInt& e : exprs) {
    SymInt back = SymInt::parse(e.str());
    EXPECT_EQ(back, e) << e.str() << " parsed as " << back.str();
    EXPECT_EQ(back.str(), e.str());
    SymEnv env{{"s0", 7}, {"s1", 3}};
    EXPECT_EQ(back.evaluate(env), e.evaluate(env)) << e.str();
  }
}

TEST(SymInt, ParsesTorchExportSrepr) {
  const std::string sym27 = "Symbol('s27', positive=True, integer=True)";
  SymInt a = SymInt::parse("Symbol('s77', positive=True, integer=True)");
  EXPECT_EQ(a, SymInt::symbol("s77"));
  EXPECT_EQ(a.as_symbol(), "s77");
  SymInt m = SymInt::parse("Mul(Integer(32), " + sym27 + ")");
  EXPECT_EQ(m, SymInt::symbol("s27") * 32);
  EXPECT_EQ(m.str(), "32*s27");
  SymInt p = SymInt::parse("Pow(" + sym27 + ", Integer(2))");
  EXPECT_EQ(p.evaluate({{"s27", 9}}), 81);
  EXPECT_EQ(p, SymInt::symbol("s27") * SymInt::symbol("s27"));
  SymInt mn =
      SymInt::parse("Min(Mul(Integer(16), " + sym27 + "), Mul(Integer(32), " + sym27 + "))");
  EXPECT_EQ(mn, SymInt::min(SymInt::symbol("s27") * 16, SymInt::symbol("s27") * 32));
  EXPECT_EQ(mn.evaluate({{"s27", 5}}), 80);
  SymInt mn2 = SymInt::parse("Min(Integer(64), Mul(Integer(64), " + sym27 + "))");
  EXPECT_EQ(mn2.evaluate({{"s27", 3}}), 64);
  SymInt two = SymInt::parse(
      "Mul(Symbol('s23', positive=True, integer=True), Symbol('s27', positive=True, "
      "integer=True))");
  EXPECT_EQ(two, SymInt::symbol("s23") * SymInt::symbol("s27"));
  SymInt add = SymInt::parse("Add(Mul(Integer(-1), " + sym27 + "), Integer(3))");
  EXPECT_EQ(add, -SymInt::symbol("s27") + 3);
  EXPECT_EQ(SymInt::parse("FloorDiv(" + sym27 + ", Integer(2))"),
            SymInt::symbol("s27").floordiv(2));
  EXPECT_EQ(SymInt::parse("Mod(" + sym27 + ", Integer(4))"), SymInt::symbol("s27").mod(4));
  EXPECT_EQ(SymInt::parse("PythonMod(" + sym27 + ", Integer(4))"), SymInt::symbol("s27").mod(4));
  EXPECT_EQ(SymInt::parse("Max(Integer(1), " + sym27 + ")"), SymInt::max(1, SymInt::symbol("s27")));
  EXPECT_EQ(SymInt::parse("CeilDiv(" + sym27 + ", Integer(4))").evaluate({{"s27", 9}}), 3);
  EXPECT_EQ(SymInt::parse("Symbol(\"s1\")"), s1);
  EXPECT_EQ(SymInt::parse("Integer(-5)"), SymInt(-5));
}

TEST(SymInt, ParsesPlainText) {
  EXPECT_EQ(SymInt::parse("2*s0 + 1"), s0 * 2 + 1);
  EXPECT_EQ(SymInt::parse("  2 * s0+1 "), s0 * 2 + 1);
  EXPECT_EQ(SymInt::parse("s0//2"), s0.floordiv(2));
  EXPECT_EQ(SymInt::parse("((s0//2))"), s0.floordiv(2));
  EXPECT_EQ(SymInt::parse("FloorDiv(s0, 2)"), s0.floordiv(2));
  EXPECT_EQ(SymInt::parse("s0 % 4"), s0.mod(4));
  EXPECT_EQ(SymInt::parse("-s0 + 3"), SymInt(3) - s0);
  EXPECT_EQ(SymInt::parse("s0 - -2"), s0 + 2);
  EXPECT_EQ(SymInt::parse("2*(s0 + 1)"), s0 * 2 + 2);
  EXPECT_EQ(SymInt::parse("s0*s1 - s1*s0"), SymInt(0));
  EXPECT_EQ(SymInt::parse("Max(s0, 4)"), SymInt::max(s0, 4));
  EXPECT_EQ(SymInt::parse("Min(s0, 4, 2)"), SymInt::min(SymInt::min(s0, 4), 2));
  EXPECT_EQ(SymInt::parse("17").constant(), 17);
  EXPECT_EQ(SymInt::parse("-17").constant(), -17);
  EXPECT_EQ(SymInt::parse("u_0"), SymInt::symbol("u_0"));
}

TEST(SymInt, ParseRejectsGarbageWithAnError) {
  // Each text with the part of the message that names what is wrong with it.
  const std::pair<std::string, std::string> bad[] = {
      {"", "unexpected end"},
      {"   ", "unexpected end"},
      {"2*", "unexpected end"},
      {"s0 +", "unexpected end"},
      {"(s0", "expected ')'"},
      {"s0)", "unexpected text"},
      {"2 s0", "unexpected text"},
      {"s0 / 2", "unexpected text"},
      {"Symbol(s0)", "expected a quoted name"},
      {"Symbol('s0'", "expected ','"},
      {"Symbol('s0", "unterminated name"},
      {"Symbol('')", "empty symbol name"},
      {"Foo(s0)", "unknown function Foo"},
      {"Integer(1, 2)", "Integer takes 1 arguments"},
      {"Integer()", "Integer needs arguments"},
      {"Pow(s0, s1)", "only constant exponents in [0, 64] are supported"},
      {"Pow(s0, -1)", "only constant exponents in [0, 64] are supported"},
      {"Pow(s0, 100000)", "only constant exponents in [0, 64] are supported"},
      {"Mul(Integer(2), ", "unexpected end"},
      {"99999999999999999999", "integer out of range"},
      {"9223372036854775807 + 1", "integer overflow in a symbolic size"},
      {"3**99", "only constant exponents in [0, 64] are supported"},
      {"s0 $ 2", "unexpected text"},
      {"Max()", "Max needs arguments"},
      {"FloorDiv(s0)", "FloorDiv takes 2 arguments"},
      {"FloorDiv(s0, 0)", "division by zero"},
      {"s0 ** ", "unexpected end"},
      {std::string(100000, '('), "expression nested too deeply"},
      {std::string(100000, '-') + "s0", "expression nested too deeply"},
      {"Symbol('s0', positive=True, integer=True", "expected ','"},
      {std::string("s0\0s1", 5), "unexpected text"},
  };
  for (const auto& [text, why] : bad) {
    try {
      SymInt v = SymInt::parse(text);
      ADD_FAILURE() << "accepted '" << text.substr(0, 40) << "' as " << v.str();
    } catch (const Error& e) {
      EXPECT_FALSE(e.where().empty()) << text.substr(0, 40);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos)
          << text.substr(0, 40) << ": the error does not say \"" << why << "\": " << e.what();
      EXPECT_LT(std::string(e.what()).size(), 1000u);
    }
  }
  try {
    SymInt::parse("2*s0 +");
    ADD_FAILURE() << "accepted '2*s0 +'";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "SymInt::parse");
    EXPECT_NE(e.actual().find("2*s0 +"), std::string::npos);
    EXPECT_NE(e.what_part().find("unexpected end"), std::string::npos) << e.what();
  }
}

TEST(SymIntParse, RejectsMalformedFunctionsWithAnError) {
  // Found by fuzzing the .pt2 reader: these reached undefined behaviour before.
  ANVIL_EXPECT_ERROR(SymInt::parse("Max()"), "Max needs arguments");
  ANVIL_EXPECT_ERROR(SymInt::parse("Min()"), "Min needs arguments");
  ANVIL_EXPECT_ERROR(SymInt::parse("Pow(s0, 100000)"),
                     "only constant exponents in [0, 64] are supported");
  ANVIL_EXPECT_ERROR(SymInt::parse("Pow(s0, -1)"),
                     "only constant exponents in [0, 64] are supported");
  ANVIL_EXPECT_ERROR(SymInt::parse("9223372036854775807 + 1"),
                     "integer overflow in a symbolic size");
  EXPECT_EQ(SymInt::parse("Max(s0)"), SymInt::symbol("s0"));
}

}  // namespace
}  // namespace anvil
