// Devices, device contexts, ports and GIDs.
//
// Ownership: Context owns one ibv_context.  Every verbs object created from it (PD, CQ,
// channel, ...) holds a shared_ptr to its parent, so a parent can never be destroyed under
// a live child.  All functions here are setup-path (they may allocate and make syscalls)
// and thread-safe in the sense libibverbs is: distinct objects may be used concurrently.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"

namespace conduit::verbs {

struct DeviceInfo {
  std::string name;         // "rxe0", "mlx5_0"
  uint64_t node_guid = 0;   // host byte order
  std::string transport;    // "InfiniBand", "iWARP", ...
};

// The devices libibverbs knows about.  An empty vector (not an error) when there are none.
Result<std::vector<DeviceInfo>> list_devices();

using Gid = std::array<uint8_t, 16>;

enum class GidType : uint8_t { kIb, kRoceV1, kRoceV2, kUnknown };
std::string_view gid_type_name(GidType type);

struct GidEntry {
  int index = 0;
  Gid gid{};
  GidType type = GidType::kUnknown;
  bool is_ipv4_mapped() const;  // ::ffff:a.b.c.d
  std::string to_string() const;  // "fe80:0000:...", perftest's layout
};

std::string gid_to_string(const Gid& gid);

struct PortInfo {
  uint8_t port_num = 0;
  ibv_port_state state = IBV_PORT_NOP;
  ibv_mtu active_mtu = IBV_MTU_1024;
  uint16_t lid = 0;
  uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  int gid_table_len = 0;
  bool active() const { return state == IBV_PORT_ACTIVE; }
  bool is_ethernet() const { return link_layer == IBV_LINK_LAYER_ETHERNET; }
};

std::string_view port_state_name(ibv_port_state state);
// ibv_mtu enum value <-> bytes (256..4096); 0 for invalid.
int mtu_bytes(ibv_mtu mtu);

class Context : public std::enable_shared_from_this<Context> {
 public:
  // Opens the device called `name`; with an empty name, the first device that has an
  // active port.  kNotFound when no such device exists, kUnavailable when it has no active
  // port.
  static Result<std::shared_ptr<Context>> open(std::string_view name = {});
  // Wraps a context that someone else opened (e.g. rdma_cm's id->verbs).  Does not close it.
  static std::shared_ptr<Context> borrow(ibv_context* ctx);

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ibv_context* native_handle() const { return ctx_; }
  std::string_view name() const;
  const ibv_device_attr& attr() const { return attr_; }

  // First port whose state is ACTIVE (1-based), or kUnavailable.
  Result<uint8_t> first_active_port() const;
  Result<PortInfo> port(uint8_t port_num) const;
  // All valid entries of the port's GID table (zero GIDs skipped).
  Result<std::vector<GidEntry>> gids(uint8_t port_num) const;
  // The GID index to use for RoCEv2 over IPv4 (perftest's choice), else RoCEv2 of any
  // family, else the first non-zero GID (InfiniBand or RoCEv1).
  Result<GidEntry> default_gid(uint8_t port_num) const;
  // The port's hardware counters, name and value, sorted by name:
  // /sys/class/infiniband/<dev>/ports/<port>/hw_counters (what `rdma statistic` shows;
  // rxe: sent_pkts, retry_exceeded_err, rcvd_rnr_err, ...; "lifespan", a setting, left out).
  // Device-wide: every QP on the port adds to them.  kNotFound when the device has none.
  // Reads one file per counter: for status tools, not the data path.  Any thread.
  Result<std::vector<std::pair<std::string, uint64_t>>> port_counters(uint8_t port_num) const;

 private:
  Context(ibv_context* ctx, bool owned);
  ibv_context* ctx_;
  bool owned_;
  ibv_device_attr attr_{};
};

}  // namespace conduit::verbs
