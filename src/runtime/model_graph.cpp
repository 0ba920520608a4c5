// CUDA graphs of device runs (Model::Impl::graph_run). A capturable package (manifest
// "graph_capturable", no host steps) runs each key — the symbols' values, the arena and the
// constant pointers — plainly once (a warm-up: cuBLASLt plans and workspaces), is captured on
// the second run into staging buffers the runner owns, and is replayed from then on: the
// inputs are copied into the staging buffers, the graph is launched (one launch for every
// kernel and GEMM of the run), and the outputs are copied out. A changed shape, a swapped
// constant set or a grown arena is another key (captured anew); a capture that fails leaves
// that key plain. ModelOptions::cuda_graphs or ANVIL_CUDA_GRAPHS=0 turns it off.
#include <algorithm>

#include "core/error.h"
#include "runtime/device_backend.h"
#include "runtime/model_impl.h"

namespace anvil::runtime {

namespace {

/// Graphs kept per runner (each holds staging buffers): beyond it the oldest keys go.
constexpr size_t kMaxGraphs = 16;

std::vector<int64_t> graph_key(const std::vector<int64_t>& symbols, const AnvilRunArgs& args,
                               size_t n_constants) {
  std::vector<int64_t> key(symbols);
  key.push_back(reinterpret_cast<int64_t>(args.arena));
  for (size_t i = 0; i < n_constants; ++i)
    key.push_back(reinterpret_cast<int64_t>(args.constants[i]));
  return key;
}

}  // namespace

void Model::Impl::drop_graphs(Runner& r) {
  for (auto& [key, g] : r.graphs)
    if (g.exec && device_api) device_api->graph_destroy(options.device.index, g.exec);
  r.graphs.clear();
}

bool Model::Impl::graph_run(Runner& r, const AnvilRunArgs& args, RunContext& ctx,
                            const std::vector<int64_t>& symbols,
                            const std::vector<size_t>& in_bytes,
                            const std::vector<size_t>& out_bytes, int& rc) {
  const int dev = options.device.index;
  const auto key = graph_key(symbols, args, package->manifest().constants.size());
  auto it = r.graphs.find(key);
  if (it == r.graphs.end()) {
    if (r.graphs.size() >= kMaxGraphs) {  // a server cycling through many shapes: start over
      if (device_api->stream_synchronize(dev, r.stream) != 0) return false;
      drop_graphs(r);
    }
    it = r.graphs.emplace(key, RunGraph{}).first;
  }
  RunGraph& g = it->second;
  if (g.failed || g.runs++ == 0) return false;

  if (!g.exec) {  // the key's second run: capture it into staging buffers
    const size_t ni = in_bytes.size(), no = out_bytes.size();
    std::vector<void*> in(ni), out(no);
    for (size_t i = 0; i < ni; ++i) {
      g.in_stage.push_back(Storage::allocate(std::max<size_t>(in_bytes[i], 1), options.device,
                                             /*zero=*/false));
      in[i] = g.in_stage.back()->data();
    }
    for (size_t o = 0; o < no; ++o) {
      // outputs sharing one storage (views of each other) share one staging buffer; an output
      // in an input's memory cannot be staged apart from it
      for (size_t i = 0; i < ni; ++i)
        if (args.outputs[o] == args.inputs[i]) {
          g.failed = true;
          return false;
        }
      int slot = -1;
      for (size_t p = 0; p < o; ++p)
        if (args.outputs[p] == args.outputs[o]) slot = g.out_slot[p];
      if (slot < 0) {
        slot = static_cast<int>(g.out_stage.size());
        g.out_stage.push_back(Storage::allocate(std::max<size_t>(out_bytes[o], 1), options.device,
                                                /*zero=*/false));
      }
      g.out_slot.push_back(slot);
      out[o] = g.out_stage[static_cast<size_t>(slot)]->data();
    }
    AnvilRunArgs staged = args;
    staged.inputs = in.data();
    staged.outputs = out.data();
    RunContext capture_ctx;  // a failed capture's errors stay out of the run's context
    capture_ctx.stream = ctx.stream;
    capture_ctx.device_api = ctx.device_api;
    capture_ctx.device_index = ctx.device_index;
    capture_ctx.generator = ctx.generator;
    staged.run_ctx = &capture_ctx;
    if (device_api->graph_begin(dev, r.stream) != 0) {
      g.failed = true;
      return false;
    }
    const int crc = entry->run(r.instance, &staged);
    void* exec = nullptr;
    const bool ok = crc == 0 && !capture_ctx.failed();
    const int erc = device_api->graph_end(dev, r.stream, ok ? &exec : nullptr);
    if (!ok || erc != 0 || exec == nullptr) {
      g.failed = true;
      g.in_stage.clear();
      g.out_stage.clear();
      g.out_slot.clear();
      return false;
    }
    g.exec = exec;
  }

  // Replay: inputs in, one launch, outputs out, all queued on the runner's stream.
  const std::string where = "Model::run(" + path + ") on a CUDA graph";
  for (size_t i = 0; i < in_bytes.size(); ++i)
    device_copy(*device_api, dev, g.in_stage[i]->data(), args.inputs[i], in_bytes[i],
                ANVIL_COPY_DEVICE_TO_DEVICE, r.stream, where);
  if (device_api->graph_launch(dev, g.exec, r.stream) != 0) {
    ctx.set_error(str(where, ": ", device_api->last_error()));
    rc = 1;
    return true;
  }
  std::vector<bool> copied(g.out_stage.size(), false);
  for (size_t o = 0; o < out_bytes.size(); ++o) {
    const auto slot = static_cast<size_t>(g.out_slot[o]);
    if (copied[slot]) continue;
    size_t bytes = 0;  // the largest extent of the outputs sharing the slot
    for (size_t p = 0; p < out_bytes.size(); ++p)
      if (static_cast<size_t>(g.out_slot[p]) == slot) bytes = std::max(bytes, out_bytes[p]);
    device_copy(*device_api, dev, args.outputs[o], g.out_stage[slot]->data(), bytes,
                ANVIL_COPY_DEVICE_TO_DEVICE, r.stream, where);
    copied[slot] = true;
  }
  rc = 0;
  return true;
}

}  // namespace anvil::runtime
