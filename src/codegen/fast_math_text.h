// Branch-free float math for generated C++ (exp, tanh, sigmoid, erf as `fast_*`, float and
// double overloads): the text every CPU translation unit's preamble holds (codegen/cpu) and the
// GEMM templates' fused epilogues use (codegen/gemm/cpu_templates), so a fused activation
// computes what the loop kernel after an unfused GEMM would. Needs <cmath>, <cstdint>,
// <cstring> and INFINITY; defines `static inline` functions in the enclosing namespace.
#pragma once

#include <string>

namespace anvil::codegen {

const std::string& fast_math_text();

}  // namespace anvil::codegen
