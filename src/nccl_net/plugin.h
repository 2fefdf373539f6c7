// The plugin's engine behind the exported v9/v10 tables (exports.cc): one progress thread
// running one reactor::EventLoop, on which every rma::TaggedEndpoint of the process lives.
//
// Why a process-wide object: NCCL's v9/v10 init() takes no context and returns none, so the
// state it creates can only be the library's own (created by the first init(), torn down at
// unload/exit).  Everything else hangs off the comms NCCL holds.
//
// Threading: every entry point may be called from any NCCL thread (the proxy threads).  Setup
// and teardown (listen's endpoint, connect/accept steps that touch the endpoint, regMr,
// deregMr, close*) post to the loop and wait for it: a thread hop, tens of microseconds.
// isend/irecv validate on the caller's thread, take a request slot and post the work without
// waiting (one EventLoop::post: a mutex, a std::function, an eventfd write when the loop
// sleeps).  test() never hops: the loop stores a request's outcome, then its state with
// release order; test() loads it with acquire order (a mutex-guarded lookup validates the
// request pointer first, so a garbage pointer is an error, not a crash).
// Ownership: comms, memory handles and requests are the plugin's; NCCL's buffers stay NCCL's
// and are read (isend) or written (irecv) by the peer until test() reports the request done.
#pragma once

#include "conduit/nccl_net/net_abi.h"

namespace conduit::nccl_net {

ncclResult_t init(ncclDebugLogger_t logger);
ncclResult_t devices(int* ndev);
ncclResult_t get_properties(int dev, ncclNetProperties_t* props);
ncclResult_t listen(int dev, void* handle, void** listen_comm);
ncclResult_t connect(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_t** dev_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_t** dev_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);
ncclResult_t close_listen(void* listen_comm);
ncclResult_t get_device_mr(void* comm, void* mhandle, void** dptr_mhandle);
ncclResult_t irecv_consumed(void* recv_comm, int n, void* request);
ncclResult_t make_vdevice(int* d, ncclNetVDeviceProps_t* props);

}  // namespace conduit::nccl_net
