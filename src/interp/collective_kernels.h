// The interpreter's implementations of the collective ops (category kCollective): they run
// through dist with a live process group. See collective_kernels.cpp.
#pragma once

#include <vector>

#include "ir/op_schema.h"

namespace anvil::interp {

/// Runs the collective node of `ctx` (all_reduce, all_reduce_, wait_tensor,
/// all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast, broadcast_) on
/// the process group named by its group_name argument. Throws Error at the node otherwise.
std::vector<ir::RValue> run_collective_kernel(ir::KernelContext& ctx);

}  // namespace anvil::interp
