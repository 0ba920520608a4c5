// libFuzzer target: the .pt2 reader (zip checks, model.json's schema walk, graph building with
// the op table's shape rules, weights and constants configs). Inputs are archive bytes or the
// structured entry list of fuzz_util.h. A load either gives a graph that the verifier accepts
// and that prints, or raises anvil::Error; any other exception or a crash is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "frontend/pt2_reader.h"
#include "fuzz_util.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    // (The zip writer refuses entry names no archive may hold: Error, as the reader would.)
    const std::string bytes =
        anvil::fuzz::archive_bytes(input, [](const std::string&) { return 1; });
    auto graph = anvil::frontend::load_pt2_bytes(bytes, "fuzz.pt2");
    anvil::ir::verify(*graph);
    (void)anvil::ir::print_graph(*graph);
  } catch (const anvil::Error&) {
  }
  return 0;
}
