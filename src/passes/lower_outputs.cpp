// The Lowerer's end of the run: user outputs (own storage or views of another output or of an
// input) and the writes of buffer, parameter and user-input mutations.
#include <map>
#include <set>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

void Lowerer::finish_outputs() {
  node_ = nullptr;
  std::set<int> taken;
  std::map<const ir::Value*, std::pair<int, int>> owners;  // view root -> (output, buffer)
  int k = 0;
  for (const auto& o : graph_.output_specs()) {
    if (o.kind != ir::OutputKind::kUserOutput && o.kind != ir::OutputKind::kLossOutput) continue;
    if (!o.value || o.value->kind != ir::ValueKind::kTensor)
      throw Error("only tensor outputs are supported by the compiler", str("output ", k),
                  "a tensor value", o.value ? o.value->name : "a constant");
    const ir::Value* v = o.value;
    TRefPtr t = ref(v);
    IoSpec spec{v->name, v->type.dtype, v->type.sizes, -1};
    // Outputs that are views (through view ops only, not copies) of one value share its
    // storage, as in PyTorch; views of a user input view the input; views of constants and
    // mutable buffers are copied (callers must not reach the model's memory).
    const ir::Value* root = view_root(v);
    const Buffer* tb = t->is_buffer() ? &prog_.buffers[static_cast<size_t>(t->buffer)] : nullptr;
    const bool same_dtype = tb && t->dtype == v->type.dtype && tb->dtype == t->dtype;
    auto owner = owners.find(root);
    std::set<std::string> out_syms;
    for (const auto& sz : v->type.sizes) sz.collect_symbols(out_syms);
    const bool data_dependent = std::any_of(out_syms.begin(), out_syms.end(), [&](const auto& x) {
      return prog_.unbacked_capacity.count(x) > 0;
    });
    const bool dense = (options && options->dense_outputs) || data_dependent;
    if (dense) {
      // only an intermediate that is exactly the output's contiguous storage is taken over
      if (same_dtype && tb->kind == BufferKind::kArena && !tb->local && tb->alias_of < 0 &&
          !taken.count(t->buffer) && !mutable_buffers_.count(t->buffer) &&
          is_contiguous_view(*t) && tb->numel == numel_of(v->type.sizes)) {
        Buffer& b = prog_.buffers[static_cast<size_t>(t->buffer)];
        b.kind = BufferKind::kOutput;
        b.index = k;
        spec.buffer = t->buffer;
      } else {
        const int b = new_buffer(v->name + "_out", v->type.dtype, v->type.sizes);
        prog_.buffers[static_cast<size_t>(b)].kind = BufferKind::kOutput;
        prog_.buffers[static_cast<size_t>(b)].index = k;
        auto dst = view_of(b, v->type.dtype, v->type.sizes, contiguous(v->type.sizes), SymInt(0));
        node_ = v->producer;
        store_into(*dst, *t);
        node_ = nullptr;
        spec.buffer = b;
      }
    } else if (same_dtype && tb->kind == BufferKind::kInput && !root->producer) {
      spec.base = OutputBase::kInput;
      spec.base_index = tb->index;
      spec.strides = t->strides;
      spec.offset = t->offset;
    } else if (same_dtype && owner != owners.end() && owner->second.second == t->buffer) {
      spec.base = OutputBase::kOutput;
      spec.base_index = owner->second.first;
      spec.strides = t->strides;
      spec.offset = t->offset;
    } else if (same_dtype && tb->kind == BufferKind::kArena && !tb->local && tb->alias_of < 0 &&
               !taken.count(t->buffer) && !mutable_buffers_.count(t->buffer)) {
      Buffer& b = prog_.buffers[static_cast<size_t>(t->buffer)];
      b.kind = BufferKind::kOutput;
      b.index = k;
      spec.buffer = t->buffer;
      spec.strides = t->strides;
      spec.offset = t->offset;
      owners[root] = {k, t->buffer};
    } else {
      const int b = new_buffer(v->name + "_out", v->type.dtype, v->type.sizes);
      prog_.buffers[static_cast<size_t>(b)].kind = BufferKind::kOutput;
      prog_.buffers[static_cast<size_t>(b)].index = k;
      auto dst = view_of(b, v->type.dtype, v->type.sizes, contiguous(v->type.sizes), SymInt(0));
      node_ = v->producer;  // names the copy kernel after the value's node
      store_into(*dst, *t);
      node_ = nullptr;
      spec.buffer = b;
    }
    if (spec.buffer >= 0) taken.insert(spec.buffer);
    prog_.outputs.push_back(spec);
    ++k;
  }
  std::map<std::string, int> by_target;
  for (const auto& c : prog_.constants) by_target[c.original_name] = c.buffer;
  std::map<std::string, size_t> input_index;
  for (size_t i = 0; i < prog_.inputs.size(); ++i) input_index[prog_.inputs[i].name] = i;
  for (const auto& o : graph_.output_specs()) {
    if (o.kind == ir::OutputKind::kUserInputMutation && o.value) {
      // The input's new value is written into the caller's tensor at the end of the run.
      auto it = input_index.find(o.target);
      if (it == input_index.end())
        throw Error("mutation of an unknown user input", "output spec", "a user input name",
                    o.target);
      IoSpec& in = prog_.inputs[it->second];
      TRefPtr t = ref(o.value);
      if (t->is_buffer() && t->buffer == in.buffer && is_contiguous_view(*t)) continue;
      store_into(*view_of(in.buffer, in.dtype, in.sizes, contiguous(in.sizes), SymInt(0)), *t);
      in.mutated = true;
      continue;
    }
    if (o.kind != ir::OutputKind::kBufferMutation && o.kind != ir::OutputKind::kParameterMutation)
      continue;
    if (!o.value) continue;
    auto it = by_target.find(o.target);
    if (it == by_target.end())
      throw Error("mutation of an unknown buffer", "output spec", "a buffer name", o.target);
    const int cb = it->second;
    TRefPtr t = ref(o.value);
    const Buffer& b = prog_.buffers[static_cast<size_t>(cb)];
    if (t->is_buffer() && t->buffer == cb && is_contiguous_view(*t)) continue;
    store_into(*view_of(cb, b.dtype, b.sizes, contiguous(b.sizes), SymInt(0)), *t);
    prog_.constants[static_cast<size_t>(b.index)].is_mutable = true;
  }
}

}  // namespace anvil::passes::detail
