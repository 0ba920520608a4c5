// The collective services of AnvilRtApi (ABI minor 1, include/anvil/anvil_rt.h) on top of
// src/dist, and joining the world when a package uses collectives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anvil/anvil_rt.h"
#include "core/tensor.h"

namespace anvil::runtime {

/// True when the package (its manifest text) issues collectives.
bool package_has_collectives(const std::string& manifest_json);
/// When the manifest (JSON text) lists collectives and no world group exists yet, joins the
/// world from the launcher's environment (torchrun-style RANK / WORLD_SIZE / MASTER_ADDR /
/// MASTER_PORT, or MPI's) with the backend named by ANVIL_BACKEND (default gloo). Without that
/// environment throws Error saying what to set. `where` names the package in messages.
void join_world_for_package(const std::string& manifest_json, const std::string& where);

/// api->coll_issue_stream (ABI minor 7): posts the collective ordered after `stream`
/// (dist::OpOptions::stream), returns a handle > 0 (0 on error, through set_error).
int64_t coll_issue_stream(void* run_ctx, void* stream, const char* op, const char* group,
                          const AnvilRtTensor* inputs, int32_t n_inputs, AnvilRtTensor* outputs,
                          int32_t n_outputs, const AnvilRtScalar* attrs, int32_t n_attrs);
/// api->coll_wait_stream (ABI minor 7): releases a handle after Work::wait_stream(stream) (a
/// device event's wait queued on `stream`; a host Work, or a null stream: the host waits); 0,
/// or non-zero with the error recorded.
int coll_wait_stream(void* run_ctx, int64_t handle, void* stream);
/// api->coll_issue / coll_wait (minor 1): the same on the run's stream (RunContext::stream).
int64_t coll_issue(void* run_ctx, const char* op, const char* group, const AnvilRtTensor* inputs,
                   int32_t n_inputs, AnvilRtTensor* outputs, int32_t n_outputs,
                   const AnvilRtScalar* attrs, int32_t n_attrs);
int coll_wait(void* run_ctx, int64_t handle);
/// Waits for collectives issued on the inputs' storage before Model::run (the functional API's
/// WorkRegistry): a compiled wait_tensor on a graph input then sees finished values, and a run
/// never reads a tensor a collective is still writing. A no-op when no world exists or nothing
/// is pending.
void wait_pending_inputs(const std::vector<Tensor>& inputs);
class RunContext;
/// Waits for (and releases) the collectives a run issued and did not wait for, which happens
/// only when the run failed between an issue and its wait: their transfers write the run's
/// memory, so Model::run finishes them before it returns. Each wait is bounded by the group's
/// timeout; their errors are dropped (the run's first error is reported). Returns how many.
size_t finish_in_flight(RunContext& ctx);
/// Handles issued and not yet waited (tests).
size_t pending_collective_handles();

}  // namespace anvil::runtime
