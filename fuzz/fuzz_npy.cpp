// libFuzzer target: the .npy reader (magic, header dict, descr, shape, Fortran order, data
// size). A read either gives a tensor or raises anvil::Error; a tensor read must write back and
// read again to the same dtype, sizes and bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  anvil::Tensor t;
  try {
    t = anvil::read_npy_bytes(bytes, "fuzz.npy");
  } catch (const anvil::Error&) {
    return 0;
  }
  const anvil::Tensor back = anvil::read_npy_bytes(anvil::write_npy_bytes(t), "round trip");
  if (back.dtype() != t.dtype() || back.sizes() != t.sizes())
    anvil::fuzz::fail_property("write_npy then read_npy changed the dtype or the sizes");
  const anvil::Tensor a = t.contiguous();
  if (a.nbytes() != back.nbytes() ||
      (a.nbytes() && std::memcmp(a.data_ptr(), back.contiguous().data_ptr(), a.nbytes()) != 0))
    anvil::fuzz::fail_property("write_npy then read_npy changed the data");
  return 0;
}
