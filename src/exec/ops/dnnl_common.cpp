#include "exec/ops/dnnl_common.h"

#include <ATen/ATen.h>

namespace qforge::ops {

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpuStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

Stamp::Stamp(const at::Tensor& t) : source_(t), version_(t.defined() ? t._version() : 0) {}

bool Stamp::matches(const at::Tensor& t) const {
  if (!t.defined() || !source_.defined()) return t.defined() == source_.defined();
  if (source_.is_same(t)) return version_ == t._version();
  return t.has_storage() && source_.has_storage() &&
         source_.storage().unsafeGetStorageImpl() == t.storage().unsafeGetStorageImpl() &&
         source_.storage_offset() == t.storage_offset() && source_.sizes() == t.sizes() &&
         source_.strides() == t.strides() && source_.scalar_type() == t.scalar_type() &&
         version_ == t._version();
}

dnnl::memory::dims dnnlDims(at::IntArrayRef sizes) {
  return dnnl::memory::dims(sizes.begin(), sizes.end());
}

void executeWithHandles(const dnnl::primitive& primitive,
                        const std::unordered_map<int, dnnl::memory>& args,
                        std::initializer_list<RunHandle> handles) {
  for (const RunHandle& h : handles)
    if (h.memory != nullptr) h.memory->set_data_handle(h.data);
  primitive.execute(cpuStream(), args);
  cpuStream().wait();
  for (const RunHandle& h : handles)
    if (h.memory != nullptr) h.memory->set_data_handle(nullptr);
}

at::Tensor executeIntoChannelsLast(const dnnl::primitive& primitive,
                                   const std::unordered_map<int, dnnl::memory>& args,
                                   dnnl::memory& src_memory, const at::Tensor& src,
                                   dnnl::memory& dst_memory, const dnnl::memory::dims& dst_dims) {
  at::Tensor out = at::empty(dst_dims, src.options().memory_format(at::MemoryFormat::ChannelsLast));
  executeWithHandles(primitive, args,
                     {{&src_memory, src.data_ptr()}, {&dst_memory, out.data_ptr()}});
  return out;
}

}  // namespace qforge::ops
