// Argument checks of spec A (and spec/collectives.md §5), run by ProcessGroup's ops on the
// caller's thread before any backend sees an op (so they hold for every backend, host or
// device), plus the cross-rank fingerprint of the host engine's consistency check. Internal to
// src/dist.
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "dist/types.h"

namespace anvil::dist::detail {

/// Defined, on `device` (the group's: the CPU for host backends; a device with index -1 accepts
/// any index), a collective dtype. `role` ("input", "output 3") names it in messages.
void check_tensor(const Tensor& t, const Device& device, const std::string& where,
                  const std::string& role);
/// check_tensor, plus: an output must not overlap itself (an expanded view, stride 0).
void check_output(const Tensor& t, const Device& device, const std::string& where,
                  const std::string& role);
/// 0 <= rank < size; `role` = "src", "dst", ...
void check_rank(int rank, int size, const std::string& where, const std::string& role);
/// Same dtype for input and output.
void check_same_dtype(const Tensor& out, const Tensor& in, const std::string& where);
/// all_gather_into_tensor: out is [W*d0, ...] or [W, d0, ...] of in's dtype.
void check_all_gather(const Tensor& out, const Tensor& in, int world, const std::string& where);
/// reduce_scatter_tensor: in.size(0) divisible by W, out is [d0/W, ...].
void check_reduce_scatter(const Tensor& out, const Tensor& in, int world, const std::string& where);
/// all_to_all_single: splits of length W, non-negative, summing to dim 0 (or empty: d0 % W == 0),
/// rows of equal shape. Returns the per-rank element counts {out_counts, in_counts}.
std::pair<std::vector<int64_t>, std::vector<int64_t>> check_all_to_all(
    const Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
    const std::vector<int64_t>& in_splits, int world, const std::string& where);
/// A list form's list holds one tensor per rank: `n` == `world`. `what` ("output list of
/// all_gather") names it.
void check_per_rank_list(size_t n, int world, const std::string& what, const std::string& where);
/// `t` (named `role`) has `ref`'s dtype and shape (a different element count is spec A's
/// "Tensor operand counts must be same").
void check_like(const Tensor& t, const Tensor& ref, const std::string& where,
                const std::string& role);
/// Coalesced forms: the two lists have the same length.
void check_list_sizes(size_t outs, size_t ins, const std::string& where);

/// A fixed-size (kFingerprintBytes) record of one collective: a hash of its description and as
/// much of the description text as fits. Equal on every rank when the ranks agree.
inline constexpr int64_t kFingerprintBytes = 256;
/// Encodes `desc` into a u8 tensor of kFingerprintBytes.
Tensor encode_fingerprint(const std::string& desc);
/// The description text of an encoded fingerprint; `hash` receives its hash.
std::string decode_fingerprint(const uint8_t* p, uint64_t& hash);
/// "f32[4, 2]".
std::string tensor_desc(const Tensor& t);

}  // namespace anvil::dist::detail
