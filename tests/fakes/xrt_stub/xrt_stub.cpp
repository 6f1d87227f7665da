// STUB libxrt_coreutil: a stand-in for the XRT 2022.2 library, which is absent here (no card, no XRT).
// It fakes only the layer under the project's C++ shim (host/backends/xrt_graph_shim.cpp): the classes
// xrt::device, xrt::uuid, xrt::graph and xrt::ip the shim calls, with the signatures of the stub headers
// in include/ (laid out like XRT 2022.2). Nothing here is hardware.
//
// Every call is recorded, one line "op<TAB>name<TAB>a<TAB>b" (xrt_stub_log), and can be told to fail
// (xrt_stub_fail: throw std::runtime_error, std::system_error with a code, or a non-std exception). What a
// call does:
//   * with a handler (xrt_stub_set_handler, e.g. a Python ctypes callback bridging to a fake card): the
//     handler answers: 0 done, 1 timed out (graph.wait: std::system_error ETIME), -1 failed (its message
//     thrown as std::runtime_error);
//   * else built in: n devices (xrt_stub_set_devices, default 1), an xclbin UUID "loaded" on them
//     (xrt_stub_load; empty: any UUID opens), one 32-bit register file per IP name (unwritten words read
//     0; xrt_stub_register reads it), graphs that finish at once.
// Ops: device.open (a = index), graph.open / ip.open (name, uuid), graph.run (a = iterations), graph.wait
// (a = timeout ms), graph.end, graph.close / ip.close (the last handle released), ip.read (a = offset),
// ip.write (a = offset, b = value). Single-threaded use (the tests).
//
// Build: g++ -shared -fPIC -std=c++17 -Iinclude xrt_stub.cpp -o lib/libxrt_coreutil.so
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>

#include "experimental/xrt_graph.h"
#include "experimental/xrt_ip.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_uuid.h"

extern "C" {
typedef int (*xrt_stub_handler)(const char* op, const char* name, const char* uuid, uint32_t a, uint32_t b,
                                uint32_t* value, char* err, size_t errlen);
}

namespace {

struct failure {
  std::string kind;  // "runtime", "system", "other"
  int code;
  std::string msg;
  int count;  // calls left to fail; < 0: every call
};

std::string log_text;
xrt_stub_handler handler = nullptr;
std::map<std::string, failure> failures;
unsigned int n_devices = 1;
std::string loaded_uuid;
std::map<std::string, std::map<uint32_t, uint32_t>> registers;

void record(const char* op, const std::string& name, uint32_t a, uint32_t b) {
  log_text += std::string(op) + "\t" + name + "\t" + std::to_string(a) + "\t" + std::to_string(b) + "\n";
}

void maybe_fail(const char* op) {
  auto it = failures.find(op);
  if (it == failures.end() || it->second.count == 0) return;
  const failure f = it->second;
  if (it->second.count > 0) it->second.count--;
  if (f.kind == "system") throw std::system_error(std::error_code(f.code, std::system_category()), f.msg);
  if (f.kind == "other") throw f.code;  // not a std::exception
  throw std::runtime_error(f.msg);
}

// Record, apply a requested failure, then ask the handler; returns the handler's / built-in value.
uint32_t call(const char* op, const std::string& name, const std::string& uuid, uint32_t a, uint32_t b) {
  record(op, name, a, b);
  maybe_fail(op);
  uint32_t value = 0;
  if (handler != nullptr) {
    char err[512] = {0};
    const int rc = handler(op, name.c_str(), uuid.c_str(), a, b, &value, err, sizeof(err) - 1);
    if (rc == 1) throw std::system_error(std::error_code(ETIME, std::system_category()), err[0] ? err : "timed out");
    if (rc != 0) throw std::runtime_error(err[0] ? err : (std::string(op) + " failed"));
    return value;
  }
  const std::string what(op);
  if (what == "device.open" && a >= n_devices)
    throw std::runtime_error("Could not open device with index '" + std::to_string(a) + "'");
  if ((what == "graph.open" || what == "ip.open") && !loaded_uuid.empty() && uuid != loaded_uuid)
    throw std::runtime_error("No xclbin with UUID " + uuid + " is loaded");
  if (what == "ip.read") {
    auto& regs = registers[name];
    auto it = regs.find(a);
    return it == regs.end() ? 0 : it->second;
  }
  if (what == "ip.write") registers[name][a] = b;
  return 0;
}

// For destructors: record and tell the handler, never throw.
void call_quietly(const char* op, const std::string& name) noexcept {
  try {
    record(op, name, 0, 0);
    if (handler != nullptr) {
      char err[8] = {0};
      uint32_t value = 0;
      handler(op, name.c_str(), "", 0, 0, &value, err, sizeof(err) - 1);
    }
  } catch (...) {
  }
}

}  // namespace

namespace xrt {

// ------------------------------------------------------------------------------------------------ uuid

uuid::uuid(const std::string& s) {
  std::memset(m_uuid, 0, sizeof(m_uuid));
  std::string hex;
  for (char c : s)
    if (c != '-') hex += c;
  if (hex.size() != 32) throw std::runtime_error("bad uuid string '" + s + "'");
  for (int i = 0; i < 16; i++) m_uuid[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
}

std::string uuid::to_string() const {
  char out[37];
  const unsigned char* u = m_uuid;
  std::snprintf(out, sizeof(out), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return out;
}

// ---------------------------------------------------------------------------------------------- device

class device_impl {
 public:
  explicit device_impl(unsigned int i) : index(i) {}
  unsigned int index;
};

device::device() : handle(nullptr) {}

device::device(unsigned int didx) {
  call("device.open", "", "", didx, 0);
  handle = std::make_shared<device_impl>(didx);
}

device::device(const std::string& bdf) {
  call("device.open", bdf, "", 0, 0);
  handle = std::make_shared<device_impl>(0);
}

uuid device::load_xclbin(const std::string&) { throw std::runtime_error("STUB XRT: load_xclbin is not stubbed"); }

uuid device::get_xclbin_uuid() const { return loaded_uuid.empty() ? uuid() : uuid(loaded_uuid); }

unsigned int device::index() const { return handle ? handle->index : 0; }

// ----------------------------------------------------------------------------------------------- graph

class graph_impl {
 public:
  explicit graph_impl(std::string n) : name(std::move(n)) {}
  ~graph_impl() { call_quietly("graph.close", name); }
  std::string name;
};

graph::graph(const xrt::device& device, const xrt::uuid& xclbin_id, const std::string& name, access_mode) {
  call("graph.open", name, xclbin_id.to_string(), device.index(), 0);
  handle = std::make_shared<graph_impl>(name);
}

void graph::reset() const { call("graph.reset", handle->name, "", 0, 0); }

uint64_t graph::get_timestamp() const { return 0; }

void graph::run(uint32_t iterations) { call("graph.run", handle->name, "", iterations, 0); }

void graph::wait(std::chrono::milliseconds timeout_ms) {
  call("graph.wait", handle->name, "", static_cast<uint32_t>(timeout_ms.count()), 0);
}

void graph::wait(uint64_t cycles) { call("graph.wait_cycles", handle->name, "", static_cast<uint32_t>(cycles), 0); }

void graph::suspend() { call("graph.suspend", handle->name, "", 0, 0); }

void graph::resume() { call("graph.resume", handle->name, "", 0, 0); }

void graph::end(uint64_t cycles) { call("graph.end", handle->name, "", static_cast<uint32_t>(cycles), 0); }

// -------------------------------------------------------------------------------------------------- ip

class ip_impl {
 public:
  explicit ip_impl(std::string n) : name(std::move(n)) {}
  ~ip_impl() { call_quietly("ip.close", name); }
  std::string name;
};

ip::ip() : handle(nullptr) {}

ip::ip(const xrt::device& device, const xrt::uuid& xclbin_id, const std::string& name) {
  call("ip.open", name, xclbin_id.to_string(), device.index(), 0);
  handle = std::make_shared<ip_impl>(name);
}

void ip::write_register(uint32_t offset, uint32_t data) { call("ip.write", handle->name, "", offset, data); }

uint32_t ip::read_register(uint32_t offset) const { return call("ip.read", handle->name, "", offset, 0); }

}  // namespace xrt

// ------------------------------------------------------------------------------ test hooks (stub only)

extern "C" {

const char* xrt_stub_log(void) { return log_text.c_str(); }

void xrt_stub_reset(void) {
  log_text.clear();
  handler = nullptr;
  failures.clear();
  n_devices = 1;
  loaded_uuid.clear();
  registers.clear();
}

void xrt_stub_set_handler(xrt_stub_handler h) { handler = h; }

// The next `count` calls of `op` (count < 0: every call) throw: kind "runtime" std::runtime_error(msg),
// "system" std::system_error(code, msg), "other" a non-std exception (an int).
void xrt_stub_fail(const char* op, const char* kind, int code, const char* msg, int count) {
  failures[op] = failure{kind, code, msg, count};
}

void xrt_stub_set_devices(unsigned int n) { n_devices = n; }

void xrt_stub_load(const char* uuid_str) { loaded_uuid = uuid_str ? uuid_str : ""; }

// The built-in register file: 1 and the word in *value when (ip, offset) was written, else 0.
int xrt_stub_register(const char* ip, uint32_t offset, uint32_t* value) {
  auto it = registers.find(ip);
  if (it == registers.end() || it->second.find(offset) == it->second.end()) return 0;
  *value = it->second[offset];
  return 1;
}

}  // extern "C"
