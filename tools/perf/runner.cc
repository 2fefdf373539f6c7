// The run: connect, print the header, run every size with the READY/DONE row protocol,
// finish with the closing handshake, print the results.
#include "runner.h"

#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/verbs/device.h"
#include "report.h"
#include "session.h"
#include "tests.h"

namespace conduit::perf {
namespace {

const TestOps& ops_for(TestKind kind) {
  static constexpr TestOps kBw{bw_client, bw_server, nullptr};
  static constexpr TestOps kWriteLat{write_lat_client, write_lat_server, write_lat_prepare};
  static constexpr TestOps kSendLat{send_lat_client, send_lat_server, nullptr};
  static constexpr TestOps kRdmaLat{rdma_lat_client, passive_server, nullptr};
  switch (kind) {
    case TestKind::kWriteBw:
    case TestKind::kReadBw:
    case TestKind::kSendBw: return kBw;
    case TestKind::kWriteLat: return kWriteLat;
    case TestKind::kSendLat: return kSendLat;
    case TestKind::kReadLat:
    case TestKind::kAtomicLat: break;
  }
  return kRdmaLat;
}

Status check_device_exists(const std::string& name) {
  if (name.empty()) return {};
  CONDUIT_ASSIGN_OR_RETURN(std::vector<verbs::DeviceInfo> devices, verbs::list_devices());
  std::string names;
  for (const verbs::DeviceInfo& d : devices) {
    if (d.name == name) return {};
    names += (names.empty() ? "" : ", ") + d.name;
  }
  return Status(Code::kNotFound, "-d " + name + ": no such RDMA device (" +
                                     (names.empty() ? std::string("none found") : "found: " + names) + ")");
}

Status out_of_step(const char* expected, const CtrlMsg& got, const RowSpec& row) {
  return Status(Code::kProtocolError, std::string("expected ") + expected + " for row " + std::to_string(row.index) +
                                          " (" + std::to_string(row.size) + " B), got " +
                                          std::string(ctrl_type_name(got.type)) + " for row " +
                                          std::to_string(got.row) + " (" + std::to_string(got.size) + " B)");
}

Status run_row(Session& s, const TestOps& ops, const RowSpec& row, RowResult* out) {
  if (ops.prepare != nullptr) ops.prepare(s, row.size);
  if (s.opts().is_server()) {
    CtrlMsg ready;
    ready.type = CtrlType::kReady;
    ready.row = row.index;
    ready.size = row.size;
    CONDUIT_RETURN_IF_ERROR(s.send_ctrl(ready, row.deadline_ns));
    CtrlMsg done;
    CONDUIT_RETURN_IF_ERROR(ops.server(s, row, out, &done));
    if (done.type != CtrlType::kDone || done.row != row.index || done.size != row.size)
      return out_of_step("DONE", done, row);
    return {};
  }
  CONDUIT_ASSIGN_OR_RETURN(CtrlMsg ready, s.wait_ctrl(row.deadline_ns, "waiting for the server to start the row"));
  if (ready.type != CtrlType::kReady || ready.row != row.index || ready.size != row.size)
    return out_of_step("READY", ready, row);
  CONDUIT_RETURN_IF_ERROR(ops.client(s, row, out));
  CtrlMsg done;
  done.type = CtrlType::kDone;
  done.row = row.index;
  done.size = row.size;
  if (out->is_bw) {
    done.iterations = out->bw.iterations;
    done.bw_peak = out->bw.peak_mbs;
    done.bw_avg = out->bw.avg_mbs;
    done.msg_rate = out->bw.msg_rate_mpps;
    done.elapsed_ns = out->bw.elapsed_ns;
  } else {
    done.iterations = out->lat.iterations;
  }
  return s.send_ctrl(done, row.deadline_ns);
}

}  // namespace

Status run(const Options& cli) {
  (void)Tsc::cycles_per_us();  // calibrate (~10 ms) before anything is timed
  CONDUIT_RETURN_IF_ERROR(check_device_exists(cli.device));
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::establish(cli));
  Session& s = *session;
  const Options& o = s.opts();  // the server's copy carries the client's -n/-D
  const TestOps& ops = ops_for(o.test->kind);
  const bool prints_rows = o.test->bw || !o.is_server();
  Reporter reporter(o);
  reporter.begin(s.link_info(), prints_rows);

  const std::vector<uint32_t> sizes = o.sizes();
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    const RowSpec row{i, sizes[i], deadline_in(o.timeout_s + o.duration_s)};
    RowResult result;
    if (Status st = run_row(s, ops, row, &result); !st.ok())
      return st.annotate(std::string(o.test->name) + " " + std::to_string(row.size) + " B");
    if (prints_rows) reporter.row(result);
  }
  CONDUIT_RETURN_IF_ERROR(s.finish(deadline_in(o.timeout_s)).annotate("closing the connection"));
  reporter.finish();
  return {};
}

}  // namespace conduit::perf
