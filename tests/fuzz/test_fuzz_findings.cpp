// Regression tests of what the libFuzzer targets (fuzz/, docs/reliability.md) found: each test
// replays the input a target reported (reduced to the fields that matter) against the code that
// was fixed. CI runs this suite under ASan + UBSan too, so an undefined-behaviour regression
// fails here as it did under the fuzzer.
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/check.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "dist/store.h"
#include "dist/tcp_store.h"
#include "dist/tcp_store_protocol.h"
#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"
#include "runtime/dlpack.h"

namespace anvil {
namespace {

/// A host DLManagedTensor over `data` with `shape` and optional `strides` (empty: none).
struct DlInput {
  std::vector<int64_t> shape, strides;
  DLManagedTensor m{};
  DlInput(void* data, std::vector<int64_t> sizes, std::vector<int64_t> st, DLDataType dtype,
          uint64_t byte_offset = 0)
      : shape(std::move(sizes)), strides(std::move(st)) {
    DLTensor& t = m.dl_tensor;
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr int64_t kBig = int64_t{1} << 40;

// fuzz_dlpack: (sizes - 1) x strides summed in int64 overflowed (UBSan: signed integer overflow
// in borrow_dlpack) and a wrapped extent would have made a small storage of a huge tensor.
TEST(FuzzFindings, DlpackExtentOverflowIsRefused) {
  std::vector<float> buf(16);
  DlInput in(buf.data(), {kBig, kBig}, {kBig, 1}, kF32);
  ANVIL_EXPECT_ERROR(runtime::borrow_dlpack(&in.m, "input #0", nullptr),
                     "sizes and strides reach past the address space");
}

// fuzz_dlpack: without strides, the contiguous strides of huge sizes overflowed the same way.
TEST(FuzzFindings, DlpackContiguousStridesOverflowIsRefused) {
  std::vector<float> buf(16);
  DlInput in(buf.data(), {kBig, kBig, 4}, {}, kF32);
  ANVIL_EXPECT_ERROR(runtime::borrow_dlpack(&in.m, "input #0", nullptr), "2^63 bytes");
  // An empty tensor reaches no byte: its sizes may be anything.
  DlInput empty(nullptr, {0, kBig, kBig}, {}, kF32);
  EXPECT_EQ(runtime::borrow_dlpack(&empty.m, "input #0", nullptr).numel(), 0);
}

// fuzz_dlpack: data + byte_offset past the end of the address space (UBSan: pointer overflow).
TEST(FuzzFindings, DlpackByteOffsetOverflowIsRefused) {
  std::vector<float> buf(16);
  DlInput in(buf.data(), {0}, {}, kF32, std::numeric_limits<uint64_t>::max() - 8);
  ANVIL_EXPECT_ERROR(runtime::borrow_dlpack(&in.m, "input #0", nullptr), "byte offset");
}

// fuzz_dlpack: a float tensor at an odd byte offset was read through misaligned float pointers
// (UBSan: load of misaligned address in Tensor::copy_from).
TEST(FuzzFindings, DlpackMisalignedDataIsRefused) {
  std::vector<float> buf(16);
  DlInput in(buf.data(), {3}, {}, kF32, 38);
  ANVIL_EXPECT_ERROR(runtime::borrow_dlpack(&in.m, "input #0", nullptr),
                     "not aligned to its element size");
  DlInput ok(buf.data(), {3}, {}, kF32, 8);  // aligned offsets stay accepted
  EXPECT_EQ(runtime::borrow_dlpack(&ok.m, "input #0", nullptr).data_ptr(), buf.data() + 2);
}

// fuzz_dlpack, in core: a size-1 dim with stride INT64_MAX (legal: the stride is never used)
// made for_each_offset add the stride before checking the index (UBSan: signed overflow in
// Tensor::copy_from). The copy must read the right elements.
TEST(FuzzFindings, SizeOneDimWithHugeStrideCopies) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  const int64_t huge = std::numeric_limits<int64_t>::max();
  DlInput in(buf.data(), {3, 1, 2}, {2, huge, 1}, kF32);
  const Tensor t = runtime::borrow_dlpack(&in.m, "input #0", nullptr);
  const Tensor c = t.clone();
  ASSERT_TRUE(c.is_contiguous());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data<float>()[i], buf[i]) << i;
  // The same layout on a transposed view: rows of stride 1, columns of stride 3.
  DlInput tr(buf.data(), {3, 1, 2}, {1, huge, 3}, kF32);
  const Tensor u = runtime::borrow_dlpack(&tr.m, "input #0", nullptr).clone();
  const float want[] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(u.data<float>()[i], want[i]) << i;
}

// fuzz_tcp_store: an add() whose sum leaves int64 overflowed in the server (UBSan: signed
// integer overflow in TcpStoreServerCore::handle); HashStore and FileStore added the same way.
// The request now fails with an error naming the key, and the counter keeps its value.
TEST(FuzzFindings, TcpStoreAddOverflowIsAnError) {
  using dist::TcpStoreCmd;
  std::vector<std::pair<uint8_t, std::vector<std::string>>> replies;
  dist::TcpStoreServerCore server([&](int client, const std::string& frame) {
    uint8_t code = 0;
    std::vector<std::string> items;
    ASSERT_TRUE(dist::tcp_store_decode(frame.data() + 4, frame.size() - 4, code, items));
    replies.emplace_back(code, items);
  });
  auto request = [&](TcpStoreCmd cmd, std::vector<std::string> args) {
    const std::string f = dist::tcp_store_encode(static_cast<uint8_t>(cmd), args);
    EXPECT_TRUE(server.receive(0, f.data(), f.size()));
    return replies.back();
  };
  EXPECT_EQ(request(TcpStoreCmd::kAdd, {"count", "1"}).second, std::vector<std::string>{"1"});
  const auto bad = request(TcpStoreCmd::kAdd, {"count", "9223372036854775807"});
  EXPECT_EQ(bad.first, 2);
  ASSERT_EQ(bad.second.size(), 1u);
  EXPECT_NE(bad.second[0].find("store counter overflows int64"), std::string::npos)
      << bad.second[0];
  EXPECT_NE(bad.second[0].find("count"), std::string::npos) << bad.second[0];
  EXPECT_EQ(request(TcpStoreCmd::kGet, {"count"}).second, std::vector<std::string>{"1"});
  EXPECT_EQ(request(TcpStoreCmd::kAdd, {"count", "-2"}).second, std::vector<std::string>{"-1"});

  dist::HashStore hash;
  hash.add("n", std::numeric_limits<int64_t>::min() + 1);
  ANVIL_EXPECT_ERROR(hash.add("n", -2), "store counter overflows int64");
  EXPECT_EQ(hash.add("n", 0), std::numeric_limits<int64_t>::min() + 1);
}

// fuzz_pt2: an auto_functionalized_v2 node whose view arguments lack one of a set
// (_self_slice_dim without _self_slice_start: the fuzzer renamed it) was dereferenced as a null
// Arg (UBSan: reference binding to null pointer in v2_view). Now an Error names the missing one.
TEST(FuzzFindings, Pt2AutoFunctionalizedV2ViewArgumentMissing) {
  test::Archive a = test::Archive::from_fixture("aot/ops_auto_functionalized_aten");
  std::string& model = a.at("models/model.json");
  const size_t at = model.find("\"_self_slice_start\"");
  ASSERT_NE(at, std::string::npos);
  model.replace(at, 19, "\"_self_slice_@start\"");
  ANVIL_EXPECT_ERROR(frontend::load_pt2_bytes(a.bytes(), "hop.pt2"),
                     "auto_functionalized_v2 view argument missing");
  // The fixture itself still loads.
  EXPECT_NO_THROW(frontend::load_pt2(test::fixture_path("aot/ops_auto_functionalized_aten")));
}

// fuzz_npy: an empty array whose other dims multiply past 2^63 passed the element count check
// (the running product reached the 0 before it overflowed) and overflowed in contiguous_strides
// (UBSan: signed integer overflow in Tensor::empty). The reader now counts empty dims as 1; the
// core refuses such sizes itself for every other caller.
TEST(FuzzFindings, NpyEmptyArrayWithHugeDimsIsRefused) {
  const std::string header =
      "{'descr': '<u2', 'fortran_order': True, "
      "'shape': (53, 35, 3, 1556, 1556533, 0, 15, 315, 554), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  std::string padded = header;
  while ((10 + padded.size() + 1) % 64 != 0) padded += ' ';
  padded += '\n';
  npy += static_cast<char>(padded.size() & 0xFF);
  npy += static_cast<char>(padded.size() >> 8);
  npy += padded;
  ANVIL_EXPECT_ERROR(read_npy_bytes(npy, "finding.npy"), "the .npy shape has too many elements");
  ANVIL_EXPECT_ERROR(Tensor::empty({0, int64_t{1} << 40, int64_t{1} << 40}, DType::kFloat32),
                     "sizes too large for contiguous strides");
  // Empty arrays of ordinary sizes still read.
  EXPECT_EQ(Tensor::empty({0, 1 << 20, 1 << 20}, DType::kFloat32).numel(), 0);
}

}  // namespace
}  // namespace anvil
