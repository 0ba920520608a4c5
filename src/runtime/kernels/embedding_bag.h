// aten.embedding_bag.padding_idx and aten.repeat_interleave.Tensor on Tensors: shared by the
// runtime extern kernels (embedding_bag.cpp) and the compiler's reference kernels
// (src/ops/embedding_bag.cpp), so the interpreter and the compiled model compute the same thing.
//
// embedding_bag returns four tensors, following PyTorch 2.11's CPU kernel (_embedding_bag):
//   0 output       [B, D], weight's dtype: the per-bag sum / mean / max of the weight rows;
//                  empty bags give zeros; rows equal to padding_idx are skipped (and not
//                  counted by mean).
//   1 offset2bag   [n_indices] (bag of each index) in mode mean / max or whenever the sum fast
//                  path does not apply; [0] for mode sum on f32 / f16 / bf16 weights without
//                  padding_idx (PyTorch's meta function; it skips computing it there). The
//                  kernel fills whatever size the caller allocated ([0] or [n_indices]).
//   2 bag_size     [B] (the kernel fills whatever size the caller allocated): the number of
//                  non-padding indices per bag, in every mode. PyTorch computes this in mode
//                  mean / max (and for autograd); in mode sum at inference its CPU kernel leaves
//                  the tensor unset (zeros in practice with 1.13), while spec/aot.md case 43
//                  expects the counts ([2, 4, 2] for offsets [0, 2, 6] over 8 indices): anvil
//                  always writes the counts.
//   3 max_indices  mode max: [B, D], the weight row that won each element (0 for empty bags);
//                  other modes: a copy of bag_size (PyTorch returns bag_size's values there).
// Bags are [offsets[b], offsets[b + 1]) (the last one ends at the number of indices unless
// include_last_offset); PyTorch's CPU kernel sizes the last bag as n - offsets[B - 1] even with
// include_last_offset, which differs only when offsets[-1] != n (anvil uses the offsets).
// Index outputs have the dtype of offsets (int64, or int32 when indices and offsets are both
// int32). B = offsets.size(0) - include_last_offset for 1-D indices; B = indices.size(0) for
// 2-D indices [B, L] (offsets ignored, every bag has L indices).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace anvil::runtime::kern {

/// embedding_bag's non-tensor arguments. padding_idx < 0 means none.
struct EmbeddingBagArgs {
  int64_t mode = 0;  // 0 sum, 1 mean, 2 max
  bool include_last_offset = false;
  int64_t padding_idx = -1;
};

/// Number of bags B (see the file comment); validates ranks and the mode. Throws Error.
int64_t embedding_bag_num_bags(const Shape& weight, const Shape& indices, const Shape* offsets,
                               const EmbeddingBagArgs& a, const std::string& where);

/// Computes embedding_bag into the four preallocated outputs (see the file comment). Throws
/// Error at `where` for out-of-range indices, bad offsets and per_sample_weights misuse.
void embedding_bag(const Tensor& weight, const Tensor& indices,
                   const std::optional<Tensor>& offsets,
                   const std::optional<Tensor>& per_sample_weights, const EmbeddingBagArgs& a,
                   const Tensor& output, const Tensor& offset2bag, const Tensor& bag_size,
                   const Tensor& max_indices, const std::string& where);

/// Sum of a 1-D (or 0-d) non-negative integer repeats tensor: the output size of
/// repeat_interleave. Throws Error at `where` for negative repeats or a bad dtype / rank.
int64_t repeat_interleave_size(const Tensor& repeats, const std::string& where);

/// repeat_interleave(repeats): out = [0] * repeats[0] ++ [1] * repeats[1] ++ ... in out's dtype
/// (repeats' dtype). `out` must have repeat_interleave_size(repeats) elements.
void repeat_interleave(const Tensor& repeats, const Tensor& out, const std::string& where);

}  // namespace anvil::runtime::kern
