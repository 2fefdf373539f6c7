#include "sources.h"

#include <signal.h>

#include <cerrno>

#include "conduit/rpc/channel.h"
#include "conduit/rpc/controller.h"
#include "conduit/rpc/errors.h"
#include "conduit/rpc/status.pb.h"
#include "status_model.h"

namespace conduit::stat {

namespace {

// ConnectionStatus carries ConnSnapshot field for field (status.proto).
transport::ConnSnapshot from_proto(const rpc::ConnectionStatus& c) {
  transport::ConnSnapshot s;
  s.transport = c.transport();
  s.state = c.state();
  s.local = c.local();
  s.peer = c.peer();
  s.extensions = c.extensions();
  s.fallback = c.fallback();
  s.error = c.error();
  s.stats.bytes_read = c.bytes_read();
  s.stats.bytes_written = c.bytes_written();
  s.stats.reads = c.reads();
  s.stats.writes = c.writes();
  s.stats.wakeups = c.wakeups();
  s.stats.pinned_bytes = c.pinned_bytes();
  s.credits = c.credits();
  s.qp_state = c.qp_state();
  s.qpn = c.qpn();
  s.device = c.device();
  s.device_counters.assign(c.device_counters().begin(), c.device_counters().end());
  std::sort(s.device_counters.begin(), s.device_counters.end());
  return s;
}

}  // namespace

Result<std::vector<Row>> rpc_rows(const std::string& url, int64_t timeout_ms) {
  auto ch = rpc::Channel::create(url);
  if (!ch.ok()) return ch.status().annotate(url);
  rpc::StatusService_Stub stub(ch->get());
  rpc::StatusRequest req;
  rpc::StatusResponse resp;
  rpc::Controller cntl;
  cntl.set_timeout_ms(timeout_ms);
  stub.GetStatus(&cntl, &req, &resp, nullptr);
  if (cntl.Failed())
    return cntl.status().annotate(url + ": GetStatus (is a conduit::rpc server listening there?)");
  std::vector<Row> rows;
  for (const auto& c : resp.connections()) {
    Row r;
    r.source = url;
    r.role = "server";
    r.conn = from_proto(c);
    rows.push_back(std::move(r));
  }
  return rows;
}

Result<std::vector<Row>> preload_rows(pid_t pid, bool listeners) {
  const std::vector<preload::ProcessStatus> all = preload::read_all_status();
  std::vector<Row> rows;
  bool found = false;
  for (const preload::ProcessStatus& p : all) {
    if (pid != 0 && p.pid != pid) continue;
    found = true;
    const std::string prog = !p.name.empty() ? p.name : p.exe.substr(p.exe.find_last_of('/') + 1);
    for (const preload::SocketStatus& s : p.sockets) {
      if (s.role == "listener" && !listeners) continue;
      Row r;
      r.source = "pid " + std::to_string(p.pid) + " " + prog;
      r.pid = p.pid;
      r.fd = s.fd;
      r.role = s.role;
      if (s.has_channel) {
        r.conn = s.channel;
        // The program's view of the connection (its TCP addresses), as smcss shows it; the
        // channel's own (an shm socket path, the rendezvous port) would mean nothing to it.
        r.conn.local = s.local;
        r.conn.peer = s.peer;
      } else if (s.role == "listener") {
        r.conn.transport = s.mode;
        r.conn.state = s.phase;
        r.conn.local = s.local;
        r.conn.peer = s.peer;
        r.note = s.reason;
      } else {
        r.conn.transport = s.mode;
        r.conn.state = s.phase;
        r.conn.local = s.local;
        r.conn.peer = s.peer;
        r.conn.stats.bytes_read = s.bytes_in;
        r.conn.stats.bytes_written = s.bytes_out;
        r.conn.fallback = s.reason;
      }
      rows.push_back(std::move(r));
    }
  }
  if (pid != 0 && !found) {
    Result<std::string> dir = preload::status_dir(false);
    if (kill(pid, 0) != 0 && errno == ESRCH)
      return Status(Code::kNotFound, "no process " + std::to_string(pid));
    const std::string where = dir.ok() ? "no " + std::to_string(pid) + ".status in " + *dir
                                       : std::string(dir.status().message());
    return Status(Code::kNotFound, "process " + std::to_string(pid) + " publishes no conduit status (" + where +
                                       "; is it running under conduit-run, as this user?)");
  }
  return rows;
}

}  // namespace conduit::stat
