// Collective services for generated code: api->coll_issue_stream posts the collective on the
// group named in the call (GroupRegistry, so group names resolve at run time), ordered after the
// caller's stream, and returns a handle; api->coll_wait_stream makes the caller's stream wait on
// it (Work::wait_stream: a device group's event is waited on the stream, a host group's Work on
// the host). The minor-1 entries coll_issue / coll_wait use the run's stream. Handles live in a
// process-wide table (thread-safe), so runs on several runners may have collectives in flight at
// once (their issue order must then be the same on every rank, as for any two threads posting on
// one group).
#include "runtime/collectives.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "dist/functional.h"
#include "dist/registry.h"
#include "dist/world.h"
#include "runtime/externs.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

/// Issued, not yet waited collectives by handle.
struct HandleTable {
  std::mutex mu;
  int64_t next = 1;
  std::unordered_map<int64_t, std::shared_ptr<dist::Work>> works;
};
HandleTable& handles() {
  static HandleTable* t = new HandleTable();  // never destroyed: works may outlive statics
  return *t;
}

/// Attribute lookups by name (throwing Error when a required one is missing).
const AnvilRtScalar* find_attr(const AnvilRtScalar* attrs, int32_t n, const std::string& name) {
  for (int32_t i = 0; i < n; ++i)
    if (attrs[i].name && name == attrs[i].name) return &attrs[i];
  return nullptr;
}

std::string string_attr(const AnvilRtScalar* attrs, int32_t n, const std::string& name,
                        const std::string& where) {
  const AnvilRtScalar* a = find_attr(attrs, n, name);
  if (!a || a->kind != 2 || !a->s) throw Error("missing string attribute", where, name, "none");
  return a->s;
}

int64_t int_attr(const AnvilRtScalar* attrs, int32_t n, const std::string& name,
                 const std::string& where) {
  const AnvilRtScalar* a = find_attr(attrs, n, name);
  if (!a || a->kind != 0) throw Error("missing int attribute", where, name, "none");
  return a->i;
}

std::vector<int64_t> ints_attr(const AnvilRtScalar* attrs, int32_t n, const std::string& name) {
  const AnvilRtScalar* a = find_attr(attrs, n, name);
  if (!a || a->kind != 3 || !a->ints) return {};
  return std::vector<int64_t>(a->ints, a->ints + a->n_ints);
}

/// The group size the graph was exported for must be the group's.
void check_group_size(const dist::ProcessGroup& pg, int64_t group_size, const std::string& where) {
  ANVIL_CHECK(group_size == pg.size(), where,
              "group_size the model was compiled for differs from the group's size",
              str(pg.size(), " (group '", pg.name(), "')"), std::to_string(group_size));
}

/// A view of a descriptor as a Tensor on the descriptor's device (the group's checks then refuse
/// a device the group does not work on, naming it; extern kernels take host memory only).
Tensor collective_tensor(const AnvilRtTensor& t, const std::string& where) {
  if (t.device_type == ANVIL_DEVICE_CPU) return tensor_from_rt(t, where);
  ANVIL_CHECK(t.device_type == ANVIL_DEVICE_CUDA, where, "unknown device type of a tensor",
              "ANVIL_DEVICE_CPU or ANVIL_DEVICE_CUDA", std::to_string(t.device_type));
  AnvilRtTensor host = t;
  host.device_type = ANVIL_DEVICE_CPU;
  const Tensor v = tensor_from_rt(host, where);  // the checks of the layout; memory not touched
  auto storage =
      Storage::wrap(t.data, v.storage()->nbytes(), nullptr, Device::cuda(t.device_index));
  return Tensor(std::move(storage), v.dtype(), v.sizes(), v.strides(), 0);
}

/// Posts collective `op` on `group` with the call's descriptors; returns its Work.
std::shared_ptr<dist::Work> post(const std::string& op, const std::string& group,
                                 const AnvilRtTensor* inputs, int32_t n_inputs,
                                 AnvilRtTensor* outputs, int32_t n_outputs,
                                 const AnvilRtScalar* attrs, int32_t n_attrs,
                                 const dist::OpOptions& opts) {
  const std::string where = str("compiled ", op, " on group '", group, "'");
  auto pg = dist::GroupRegistry::instance().resolve(group);
  std::vector<Tensor> outs, ins;
  for (int32_t i = 0; i < n_outputs; ++i) outs.push_back(collective_tensor(outputs[i], where));
  for (int32_t i = 0; i < n_inputs; ++i) ins.push_back(collective_tensor(inputs[i], where));
  ANVIL_CHECK(!outs.empty(), where, "collective without output tensors", ">= 1", "0");
  if (op == "all_reduce") {
    const auto rop = dist::reduce_op_from_name(string_attr(attrs, n_attrs, "reduce_op", where));
    if (outs.size() == 1) return pg->all_reduce(outs[0], rop, opts);
    return pg->all_reduce_coalesced(outs, rop, opts);
  }
  if (op == "broadcast") {
    ANVIL_CHECK(outs.size() == 1, where, "broadcast of several tensors", "1", str(outs.size()));
    return pg->broadcast(outs[0], static_cast<int>(int_attr(attrs, n_attrs, "src", where)), opts);
  }
  // all_gather / reduce_scatter: input i -> output i; several pairs = the coalesced form.
  ANVIL_CHECK(ins.size() == outs.size() && (ins.size() == 1 || op != "all_to_all_single"), where,
              "wrong number of tensors", "one output per input (1 for all_to_all_single)",
              str(ins.size(), " and ", outs.size()));
  if (op == "all_gather_into_tensor") {
    check_group_size(*pg, int_attr(attrs, n_attrs, "group_size", where), where);
    if (outs.size() == 1) return pg->all_gather_into_tensor(outs[0], ins[0], opts);
    return pg->all_gather_into_tensor_coalesced(outs, ins, opts);
  }
  if (op == "reduce_scatter_tensor") {
    check_group_size(*pg, int_attr(attrs, n_attrs, "group_size", where), where);
    const auto rop = dist::reduce_op_from_name(string_attr(attrs, n_attrs, "reduce_op", where));
    if (outs.size() == 1) return pg->reduce_scatter_tensor(outs[0], ins[0], rop, opts);
    return pg->reduce_scatter_tensor_coalesced(outs, ins, rop, opts);
  }
  if (op == "all_to_all_single")
    return pg->all_to_all_single(outs[0], ins[0], ints_attr(attrs, n_attrs, "output_split_sizes"),
                                 ints_attr(attrs, n_attrs, "input_split_sizes"), opts);
  throw Error("unknown collective", where,
              "all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor or "
              "all_to_all_single",
              op);
}

/// Records an error on the run.
void record(void* run_ctx, const std::string& msg) {
  if (run_ctx) static_cast<RunContext*>(run_ctx)->set_error(msg);
}

/// The run's stream (null without a run context).
void* run_stream(void* run_ctx) {
  return run_ctx ? static_cast<RunContext*>(run_ctx)->stream : nullptr;
}

}  // namespace

void wait_pending_inputs(const std::vector<Tensor>& inputs) {
  if (!dist::world_initialized()) return;
  for (const Tensor& t : inputs)
    if (t.defined()) dist::functional::wait_tensor(t);
}

bool package_has_collectives(const std::string& manifest_json) {
  try {
    const nlohmann::json m = nlohmann::json::parse(manifest_json);
    return m.contains("collectives") && m["collectives"].is_array() && !m["collectives"].empty();
  } catch (const std::exception&) {
    return false;  // the manifest parser reports malformed JSON
  }
}

void join_world_for_package(const std::string& manifest_json, const std::string& where) {
  if (!package_has_collectives(manifest_json)) return;
  const nlohmann::json m = nlohmann::json::parse(manifest_json);
  if (dist::world_initialized()) return;
  std::string groups;
  for (const auto& c : m["collectives"])
    if (c.contains("group") && c["group"].is_string() &&
        groups.find("'" + c["group"].get<std::string>() + "'") == std::string::npos)
      groups += (groups.empty() ? "'" : ", '") + c["group"].get<std::string>() + "'";
  const char* backend = std::getenv("ANVIL_BACKEND");
  try {
    dist::init_world_from_env(backend ? backend : "");
  } catch (const std::exception& e) {
    throw Error(str("this package uses collectives (groups ", groups,
                    ") and cannot join the distributed world: ", e.what()),
                where,
                "the launcher's environment: run it under `anvil launch -n N -- anvil run ...` "
                "or mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (backend: "
                "ANVIL_BACKEND or `anvil run --backend`: gloo (default), mpi or nccl)",
                "no usable distributed environment");
  }
}

int64_t coll_issue(void* run_ctx, const char* op, const char* group, const AnvilRtTensor* inputs,
                   int32_t n_inputs, AnvilRtTensor* outputs, int32_t n_outputs,
                   const AnvilRtScalar* attrs, int32_t n_attrs) {
  return coll_issue_stream(run_ctx, run_stream(run_ctx), op, group, inputs, n_inputs, outputs,
                           n_outputs, attrs, n_attrs);
}

int coll_wait(void* run_ctx, int64_t handle) {
  return coll_wait_stream(run_ctx, handle, run_stream(run_ctx));
}

int64_t coll_issue_stream(void* run_ctx, void* stream, const char* op, const char* group,
                          const AnvilRtTensor* inputs, int32_t n_inputs, AnvilRtTensor* outputs,
                          int32_t n_outputs, const AnvilRtScalar* attrs, int32_t n_attrs) {
  const std::string o = op ? op : "(null)", g = group ? group : "(null)";
  try {
    dist::OpOptions opts;
    opts.stream = stream;
    // A device package's run hands device memory: descriptors that name no device are on the
    // run's device (generated code fills only the layout).
    const auto* ctx = static_cast<RunContext*>(run_ctx);
    std::vector<AnvilRtTensor> ins(inputs, inputs + std::max(n_inputs, 0));
    std::vector<AnvilRtTensor> outs(outputs, outputs + std::max(n_outputs, 0));
    if (ctx && ctx->device_api)
      for (auto* list : {&ins, &outs})
        for (AnvilRtTensor& t : *list)
          if (t.device_type == ANVIL_DEVICE_CPU) {
            t.device_type = ctx->device_api->device_type;
            t.device_index = ctx->device_index;
          }
    auto work = post(o, g, ins.data(), n_inputs, outs.data(), n_outputs, attrs, n_attrs, opts);
    HandleTable& t = handles();
    std::lock_guard<std::mutex> lk(t.mu);
    const int64_t h = t.next++;
    t.works[h] = std::move(work);
    if (run_ctx) static_cast<RunContext*>(run_ctx)->issued(h);
    return h;
  } catch (const std::exception& e) {
    record(run_ctx, str("collective ", o, " on group '", g, "': ", e.what()));
  } catch (...) {
    record(run_ctx, str("collective ", o, " on group '", g, "': unknown exception"));
  }
  return 0;
}

int coll_wait_stream(void* run_ctx, int64_t handle, void* stream) {
  if (run_ctx) static_cast<RunContext*>(run_ctx)->waited(handle);
  std::shared_ptr<dist::Work> work;
  {
    HandleTable& t = handles();
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = t.works.find(handle);
    if (it == t.works.end()) {
      record(run_ctx, str("wait on an unknown collective handle ", handle));
      return 1;
    }
    work = std::move(it->second);
    t.works.erase(it);
  }
  try {
    work->wait_stream(stream);  // a device event: queued on `stream`; a host Work: waited here
    return 0;
  } catch (const std::exception& e) {
    record(run_ctx, str("collective wait: ", e.what()));
  } catch (...) {
    record(run_ctx, "collective wait: unknown exception");
  }
  return 1;
}

size_t finish_in_flight(RunContext& ctx) {
  const std::vector<int64_t> left = ctx.take_in_flight();
  for (int64_t h : left) {
    std::shared_ptr<dist::Work> work;
    {
      HandleTable& t = handles();
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.works.find(h);
      if (it == t.works.end()) continue;
      work = std::move(it->second);
      t.works.erase(it);
    }
    try {
      work->wait();  // bounded by the group's timeout
    } catch (const std::exception&) {
      // the run has failed already; its first error is the one reported
    }
  }
  return left.size();
}

size_t pending_collective_handles() {
  HandleTable& t = handles();
  std::lock_guard<std::mutex> lk(t.mu);
  return t.works.size();
}

}  // namespace anvil::runtime
