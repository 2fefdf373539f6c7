#include "conduit/verbs/device.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "conduit/base/log.h"

namespace conduit::verbs {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;

Result<DeviceList> get_devices(int* count) {
  errno = 0;
  ibv_device** list = ibv_get_device_list(count);
  if (list == nullptr) {
    // ENOSYS: the kernel has no uverbs at all, which is "no devices", not a failure.
    if (errno == ENOSYS || errno == 0) {
      *count = 0;
      return DeviceList(nullptr);
    }
    return Status::FromErrno(errno, "ibv_get_device_list");
  }
  return DeviceList(list);
}

GidType read_gid_type(ibv_context* ctx, uint8_t port, int index) {
  // Read from sysfs, as rdma-core's own tools did before ibv_query_gid_ex existed; works on
  // every rdma-core version Debian ships.
  char path[256];
  std::snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
                ibv_get_device_name(ctx->device), port, index);
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return GidType::kUnknown;
  if (line == "IB/RoCE v1") {
    ibv_port_attr pattr{};
    if (ibv_query_port(ctx, port, &pattr) == 0 && pattr.link_layer == IBV_LINK_LAYER_INFINIBAND)
      return GidType::kIb;
    return GidType::kRoceV1;
  }
  if (line == "RoCE v2") return GidType::kRoceV2;
  return GidType::kUnknown;
}

}  // namespace

std::string_view gid_type_name(GidType type) {
  switch (type) {
    case GidType::kIb: return "IB";
    case GidType::kRoceV1: return "RoCEv1";
    case GidType::kRoceV2: return "RoCEv2";
    case GidType::kUnknown: break;
  }
  return "unknown";
}

std::string gid_to_string(const Gid& gid) {
  char buf[48];
  char* p = buf;
  for (size_t i = 0; i < gid.size(); i += 2) {
    p += std::snprintf(p, 6, "%02x%02x", gid[i], gid[i + 1]);
    if (i + 2 < gid.size()) *p++ = ':';
  }
  return std::string(buf, p);
}

bool GidEntry::is_ipv4_mapped() const {
  for (int i = 0; i < 10; ++i)
    if (gid[i] != 0) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

std::string GidEntry::to_string() const { return gid_to_string(gid); }

std::string_view port_state_name(ibv_port_state state) {
  return ibv_port_state_str(state);
}

int mtu_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  CONDUIT_ASSIGN_OR_RETURN(DeviceList list, get_devices(&count));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    ibv_device* dev = list.get()[i];
    DeviceInfo info;
    info.name = ibv_get_device_name(dev);
    info.node_guid = be64toh(ibv_get_device_guid(dev));
    info.transport = dev->transport_type == IBV_TRANSPORT_IWARP ? "iWARP" : "InfiniBand";
    out.push_back(std::move(info));
  }
  return out;
}

Context::Context(ibv_context* ctx, bool owned) : ctx_(ctx), owned_(owned) {}

Context::~Context() {
  if (owned_ && ctx_ != nullptr && ibv_close_device(ctx_) != 0)
    CONDUIT_LOG(kError) << "ibv_close_device(" << name() << ") failed: " << std::strerror(errno);
}

std::shared_ptr<Context> Context::borrow(ibv_context* ctx) {
  std::shared_ptr<Context> c(new Context(ctx, false));
  if (ibv_query_device(ctx, &c->attr_) != 0)
    CONDUIT_LOG(kWarn) << "ibv_query_device: " << std::strerror(errno);
  return c;
}

Result<std::shared_ptr<Context>> Context::open(std::string_view name) {
  int count = 0;
  CONDUIT_ASSIGN_OR_RETURN(DeviceList list, get_devices(&count));
  if (count == 0) return Status(Code::kNotFound, "no RDMA devices found (is a driver such as rdma_rxe loaded?)");
  bool found_name = false;
  for (int i = 0; i < count; ++i) {
    ibv_device* dev = list.get()[i];
    if (!name.empty() && name != ibv_get_device_name(dev)) continue;
    found_name = true;
    ibv_context* raw = ibv_open_device(dev);
    if (raw == nullptr) return Status::FromErrno(errno, std::string("ibv_open_device ") + ibv_get_device_name(dev));
    std::shared_ptr<Context> ctx(new Context(raw, true));
    if (ibv_query_device(raw, &ctx->attr_) != 0)
      return Status::FromErrno(errno, "ibv_query_device");
    if (ctx->first_active_port().ok()) return ctx;
    if (!name.empty())
      return Status(Code::kUnavailable, std::string("device ") + std::string(name) + " has no active port");
  }
  if (!name.empty() && !found_name)
    return Status(Code::kNotFound, "no RDMA device named " + std::string(name));
  return Status(Code::kUnavailable, "no RDMA device has an active port");
}

std::string_view Context::name() const {
  return ctx_ ? ibv_get_device_name(ctx_->device) : "";
}

Result<uint8_t> Context::first_active_port() const {
  for (uint8_t p = 1; p <= attr_.phys_port_cnt; ++p) {
    auto info = port(p);
    if (info.ok() && info->active()) return p;
  }
  return Status(Code::kUnavailable, std::string(name()) + ": no active port");
}

Result<PortInfo> Context::port(uint8_t port_num) const {
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx_, port_num, &pa); rc != 0)
    return Status::FromErrno(rc, "ibv_query_port " + std::to_string(port_num));
  PortInfo info;
  info.port_num = port_num;
  info.state = pa.state;
  info.active_mtu = pa.active_mtu;
  info.lid = pa.lid;
  info.link_layer = pa.link_layer;
  info.gid_table_len = pa.gid_tbl_len;
  return info;
}

Result<std::vector<GidEntry>> Context::gids(uint8_t port_num) const {
  CONDUIT_ASSIGN_OR_RETURN(PortInfo info, port(port_num));
  std::vector<GidEntry> out;
  for (int i = 0; i < info.gid_table_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx_, port_num, i, &gid) != 0) continue;
    GidEntry e;
    e.index = i;
    std::memcpy(e.gid.data(), gid.raw, 16);
    bool zero = true;
    for (uint8_t b : e.gid) zero = zero && b == 0;
    if (zero) continue;
    e.type = read_gid_type(ctx_, port_num, i);
    out.push_back(e);
  }
  return out;
}

Result<GidEntry> Context::default_gid(uint8_t port_num) const {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<GidEntry> table, gids(port_num));
  if (table.empty()) return Status(Code::kUnavailable, std::string(name()) + ": empty GID table");
  for (const auto& e : table)
    if (e.type == GidType::kRoceV2 && e.is_ipv4_mapped()) return e;
  for (const auto& e : table)
    if (e.type == GidType::kRoceV2) return e;
  return table.front();
}

Result<std::vector<std::pair<std::string, uint64_t>>> Context::port_counters(uint8_t port_num) const {
  const std::string dir =
      "/sys/class/infiniband/" + std::string(name()) + "/ports/" + std::to_string(port_num) + "/hw_counters";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Status(Code::kNotFound, dir + ": " + std::strerror(errno));
  std::vector<std::pair<std::string, uint64_t>> out;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == ".." || n == "lifespan") continue;
    std::ifstream f(dir + "/" + n);
    uint64_t v = 0;
    if (f >> v) out.emplace_back(n, v);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace conduit::verbs
