// Arrays <-> anvil Tensors without copies (tensor_convert.h).
#include "tensor_convert.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/storage.h"
#include "runtime/dlpack.h"

namespace nb = nanobind;

namespace anvil::python {

namespace {

using Code = nb::dlpack::dtype_code;

nb::dlpack::dtype make_dtype(Code code, int bits) {
  nb::dlpack::dtype t;
  t.code = static_cast<uint8_t>(code);
  t.bits = static_cast<uint8_t>(bits);
  t.lanes = 1;
  return t;
}

/// The type objects of numpy.ndarray and torch.Tensor once their modules are imported (never
/// imported here: a framework the caller has not imported cannot be the caller's).
PyObject* module_type(const char* module, const char* name) {
  PyObject* modules = PySys_GetObject("modules");  // borrowed
  PyObject* mod = modules ? PyDict_GetItemString(modules, module) : nullptr;
  if (!mod) return nullptr;
  PyObject* type = PyObject_GetAttrString(mod, name);
  if (!type) PyErr_Clear();
  return type;  // kept for the life of the process (types are not unloaded)
}

}  // namespace

Framework framework_of(nb::handle obj) {
  static PyObject* numpy_type = nullptr;
  static PyObject* torch_type = nullptr;
  if (!numpy_type) numpy_type = module_type("numpy", "ndarray");
  if (numpy_type && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(numpy_type)))
    return Framework::kNumpy;
  if (!torch_type) torch_type = module_type("torch", "Tensor");
  if (torch_type && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(torch_type)))
    return Framework::kTorch;
  return Framework::kOther;
}

DType dtype_from_dlpack(nb::dlpack::dtype t, const std::string& where, const DType* want) {
  if (t.lanes == 1 && t.bits == 8) {  // DLPack 1.x's float8 codes (the runtime knows 0.6's)
    switch (static_cast<Code>(t.code)) {
      case Code::Float8_E4M3FN:
        return DType::kFloat8E4M3FN;
      case Code::Float8_E5M2:
        return DType::kFloat8E5M2;
      case Code::Float8_E4M3FNUZ:
        return DType::kFloat8E4M3FNUZ;
      case Code::Float8_E5M2FNUZ:
        return DType::kFloat8E5M2FNUZ;
      default:
        break;
    }
  }
  return runtime::dtype_from_dlpack(DLDataType{t.code, t.bits, t.lanes}, where, want);
}

nb::dlpack::dtype dlpack_from_dtype(DType d, const std::string& where) {
  switch (d) {
    case DType::kFloat8E4M3FN:
      return make_dtype(Code::Float8_E4M3FN, 8);
    case DType::kFloat8E5M2:
      return make_dtype(Code::Float8_E5M2, 8);
    case DType::kFloat8E4M3FNUZ:
      return make_dtype(Code::Float8_E4M3FNUZ, 8);
    case DType::kFloat8E5M2FNUZ:
      return make_dtype(Code::Float8_E5M2FNUZ, 8);
    default:
      break;
  }
  const DLDataType t = runtime::dlpack_dtype(d);
  if (t.code == kDLOpaqueHandle)
    throw Error("dtype has no DLPack code", where, "a DLPack dtype", dtype_name(d));
  nb::dlpack::dtype out;
  out.code = t.code;
  out.bits = t.bits;
  out.lanes = t.lanes;
  return out;
}

Tensor borrow_array(const nb::ndarray<nb::ro>& array, const std::string& where, const DType* want) {
  const int device_type = array.device_type();
  const bool cuda = device_type == kDLCUDA;
  if (device_type != kDLCPU && device_type != kDLCUDAHost && !cuda)
    throw Error("array is neither in host memory nor on a CUDA device", where,
                "a CPU or CUDA array", str("DLPack device type ", device_type));
  // The same checks as the C ABI's DLPack intake (runtime::borrow_strided): sizes and strides in
  // checked arithmetic, element alignment. data() has the DLPack byte offset added already.
  const size_t ndim = array.ndim();
  std::vector<int64_t> shape(ndim), strides(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    shape[d] = static_cast<int64_t>(array.shape(d));
    strides[d] = array.stride(d);
  }
  runtime::StridedArray a;
  a.dtype = dtype_from_dlpack(array.dtype(), where, want);
  a.data = const_cast<void*>(array.data());
  a.device = cuda ? Device::cuda(array.device_id()) : Device::cpu();
  a.ndim = static_cast<int64_t>(ndim);
  a.shape = shape.data();
  a.strides = strides.data();
  return runtime::borrow_strided(a, where);
}

nb::object export_tensor(const Tensor& t, Framework framework) {
  const std::string where = "anvil output";
  const bool host = t.device().is_cpu();
  Tensor out = t;
  // NumPy has no bfloat16 or float8: those come back as float32 (a converted copy).
  if (host && framework != Framework::kTorch &&
      (t.dtype() == DType::kBFloat16 || t.dtype() == DType::kFloat8E4M3FN ||
       t.dtype() == DType::kFloat8E5M2 || t.dtype() == DType::kFloat8E4M3FNUZ ||
       t.dtype() == DType::kFloat8E5M2FNUZ))
    out = t.to(DType::kFloat32);
  // The owner keeps the Tensor (and so its storage) alive as long as the array lives.
  auto* keep = new Tensor(out);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const size_t ndim = static_cast<size_t>(out.dim());
  std::vector<size_t> shape(ndim);
  for (size_t d = 0; d < ndim; ++d) shape[d] = static_cast<size_t>(out.sizes()[d]);
  // A storage offset is folded into the data pointer (DLPack's byte_offset is little used).
  char* data = static_cast<char*>(out.data_ptr());
  const nb::dlpack::dtype dt = dlpack_from_dtype(out.dtype(), where);
  const int device_type = host ? kDLCPU : kDLCUDA;
  const int device_id = host ? 0 : out.device().index;
  const int64_t* strides = ndim ? out.strides().data() : nullptr;
  if (framework == Framework::kTorch)
    return nb::ndarray<nb::pytorch>(data, ndim, shape.data(), owner, strides, dt, device_type,
                                    device_id)
        .cast();
  if (host)
    return nb::ndarray<nb::numpy>(data, ndim, shape.data(), owner, strides, dt, device_type,
                                  device_id)
        .cast();
  return nb::ndarray<nb::array_api>(data, ndim, shape.data(), owner, strides, dt, device_type,
                                    device_id)
      .cast();
}

}  // namespace anvil::python
