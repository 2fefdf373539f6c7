// The symbols NCCL dlsym()s: ncclNetPlugin_v10 and ncclNetPlugin_v9 (net_abi.h), each a table
// of thin adapters over plugin.h.  Every entry but init refuses to run before init().
// The v10 extras are accepted and ignored: the profiler callback and handles (no profiler
// events are emitted) and the comm config's traffic class (the rma URL chooses the transport).
#include "conduit/nccl_net/net_abi.h"
#include "conduit/base/log.h"
#include "core.h"
#include "plugin.h"

namespace conduit::nccl_net {
namespace {

#define CONDUIT_NCCL_NET_NEED_INIT(what)                                                         \
  do {                                                                                          \
    if (global() == nullptr) {                                                                  \
      CONDUIT_LOG(kError) << "nccl-net-conduit: " what " called before init (or init failed)"; \
      return ncclInternalError;                                                                 \
    }                                                                                           \
  } while (0)

ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return init(logger); }
ncclResult_t v9_init(ncclDebugLogger_t logger) { return init(logger); }
ncclResult_t e_devices(int* n) {
  CONDUIT_NCCL_NET_NEED_INIT("devices");
  return devices(n);
}
ncclResult_t e_props(int dev, ncclNetProperties_t* p) {
  CONDUIT_NCCL_NET_NEED_INIT("getProperties");
  return get_properties(dev, p);
}
ncclResult_t e_listen(int dev, void* h, void** l) {
  CONDUIT_NCCL_NET_NEED_INIT("listen");
  return listen(dev, h, l);
}
ncclResult_t v10_connect(int dev, ncclNetCommConfig_t*, void* h, void** s, ncclNetDeviceHandle_t** d) {
  CONDUIT_NCCL_NET_NEED_INIT("connect");
  return connect(dev, h, s, d);
}
ncclResult_t v9_connect(int dev, void* h, void** s, ncclNetDeviceHandle_t** d) {
  CONDUIT_NCCL_NET_NEED_INIT("connect");
  return connect(dev, h, s, d);
}
ncclResult_t e_accept(void* l, void** r, ncclNetDeviceHandle_t** d) {
  CONDUIT_NCCL_NET_NEED_INIT("accept");
  return accept(l, r, d);
}
ncclResult_t e_reg_mr(void* c, void* data, size_t size, int type, void** m) {
  CONDUIT_NCCL_NET_NEED_INIT("regMr");
  return reg_mr(c, data, size, type, m);
}
ncclResult_t e_reg_mr_dmabuf(void* c, void* data, size_t size, int type, uint64_t off, int fd, void** m) {
  CONDUIT_NCCL_NET_NEED_INIT("regMrDmaBuf");
  return reg_mr_dmabuf(c, data, size, type, off, fd, m);
}
ncclResult_t e_dereg_mr(void* c, void* m) {
  CONDUIT_NCCL_NET_NEED_INIT("deregMr");
  return dereg_mr(c, m);
}
ncclResult_t v10_isend(void* c, void* data, size_t size, int tag, void* m, void*, void** r) {
  CONDUIT_NCCL_NET_NEED_INIT("isend");
  return isend(c, data, size, tag, m, r);
}
ncclResult_t v9_isend(void* c, void* data, size_t size, int tag, void* m, void** r) {
  CONDUIT_NCCL_NET_NEED_INIT("isend");
  return isend(c, data, size, tag, m, r);
}
ncclResult_t v10_irecv(void* c, int n, void** data, size_t* sizes, int* tags, void** m, void**, void** r) {
  CONDUIT_NCCL_NET_NEED_INIT("irecv");
  return irecv(c, n, data, sizes, tags, m, r);
}
ncclResult_t v9_irecv(void* c, int n, void** data, size_t* sizes, int* tags, void** m, void** r) {
  CONDUIT_NCCL_NET_NEED_INIT("irecv");
  return irecv(c, n, data, sizes, tags, m, r);
}
ncclResult_t e_iflush(void* c, int n, void** data, int* sizes, void** m, void** r) {
  CONDUIT_NCCL_NET_NEED_INIT("iflush");
  return iflush(c, n, data, sizes, m, r);
}
ncclResult_t e_test(void* r, int* done, int* sizes) {
  CONDUIT_NCCL_NET_NEED_INIT("test");
  return test(r, done, sizes);
}
ncclResult_t e_close_send(void* c) {
  CONDUIT_NCCL_NET_NEED_INIT("closeSend");
  return close_send(c);
}
ncclResult_t e_close_recv(void* c) {
  CONDUIT_NCCL_NET_NEED_INIT("closeRecv");
  return close_recv(c);
}
ncclResult_t e_close_listen(void* l) {
  CONDUIT_NCCL_NET_NEED_INIT("closeListen");
  return close_listen(l);
}
ncclResult_t e_get_device_mr(void* c, void* m, void** d) { return get_device_mr(c, m, d); }
ncclResult_t e_irecv_consumed(void* c, int n, void* r) { return irecv_consumed(c, n, r); }
ncclResult_t e_make_vdevice(int* d, ncclNetVDeviceProps_t* p) { return make_vdevice(d, p); }

}  // namespace
}  // namespace conduit::nccl_net

using namespace conduit::nccl_net;

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v10_t ncclNetPlugin_v10;
__attribute__((visibility("default"))) extern const ncclNet_v9_t ncclNetPlugin_v9;

const ncclNet_v10_t ncclNetPlugin_v10 = {
    "conduit", v10_init, e_devices, e_props, e_listen, v10_connect, e_accept, e_reg_mr, e_reg_mr_dmabuf,
    e_dereg_mr, v10_isend, v10_irecv, e_iflush, e_test, e_close_send, e_close_recv, e_close_listen,
    e_get_device_mr, e_irecv_consumed, e_make_vdevice,
};

const ncclNet_v9_t ncclNetPlugin_v9 = {
    "conduit", v9_init, e_devices, e_props, e_listen, v9_connect, e_accept, e_reg_mr, e_reg_mr_dmabuf,
    e_dereg_mr, v9_isend, v9_irecv, e_iflush, e_test, e_close_send, e_close_recv, e_close_listen,
    e_get_device_mr, e_irecv_consumed, e_make_vdevice,
};
}
