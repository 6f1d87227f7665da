// vckattn XRT shim: the two things a Python host cannot do through pyxrt in XRT 2022.2.
//
//  * AIE graph control: pyxrt has no graph class on x86 hosts, so xrt::graph (open by device
//    index, xclbin UUID and graph name; run(iterations); wait(timeout); end) is wrapped here.
//  * Register access to the user-managed RTL kernels (the normalizers): XRT documents xrt::ip
//    for user-managed kernels (UG1393 2022.2, "Working with User-Managed Kernels"); pyxrt binds
//    no xrt::ip, so read_register / write_register are wrapped here too.
//
// Plain C ABI for ctypes (vckattn/host/backends/xrt_graph.py builds and loads it). Every call
// catches C++ exceptions; a failing call returns NULL / nonzero and leaves its message in
// vckattn_shim_last_error() (per thread).
//
// Build: g++ -shared -fPIC -std=c++17 -I$XILINX_XRT/include xrt_graph_shim.cpp
//            -L$XILINX_XRT/lib -lxrt_coreutil -o libvckattn_xrt_shim.so

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <system_error>

#include "xrt/xrt_device.h"
#include "xrt/xrt_uuid.h"

// XRT 2022.2 keeps graph and ip under experimental/; later releases moved them.
#if __has_include("xrt/xrt_graph.h")
#include "xrt/xrt_graph.h"
#else
#include "experimental/xrt_graph.h"
#endif
#if __has_include("xrt/experimental/xrt_ip.h")
#include "xrt/experimental/xrt_ip.h"
#else
#include "experimental/xrt_ip.h"
#endif

namespace {

thread_local std::string last_error;

void set_error(const char* what) { last_error = what ? what : "unknown error"; }

xrt::uuid make_uuid(const unsigned char* bytes) {
  xuid_t raw;
  std::memcpy(raw, bytes, sizeof(raw));
  return xrt::uuid(raw);
}

struct shim_graph {
  xrt::device device;
  xrt::graph graph;
};

struct shim_ip {
  xrt::device device;
  xrt::ip ip;
};

}  // namespace

extern "C" {

// Version of this C ABI (bumped when a signature changes).
int vckattn_shim_abi_version(void) { return 1; }

const char* vckattn_shim_last_error(void) { return last_error.c_str(); }

// ------------------------------------------------------------------------------ AIE graph

void* vckattn_graph_open(unsigned int device_index, const unsigned char* xclbin_uuid, const char* name) {
  try {
    xrt::device device(device_index);
    xrt::graph graph(device, make_uuid(xclbin_uuid), std::string(name));
    return new shim_graph{device, graph};
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::graph()");
  }
  return nullptr;
}

int vckattn_graph_run(void* handle, int iterations) {
  try {
    static_cast<shim_graph*>(handle)->graph.run(static_cast<uint32_t>(iterations));
    return 0;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::graph::run()");
  }
  return -1;
}

// 0: the graph is done; 1: timeout; -1: error (see vckattn_shim_last_error).
int vckattn_graph_wait(void* handle, int timeout_ms) {
  try {
    static_cast<shim_graph*>(handle)->graph.wait(std::chrono::milliseconds(timeout_ms));
    return 0;
  } catch (const std::system_error& e) {
    set_error(e.what());
    int code = e.code().value();
    return (code == ETIME || code == -ETIME) ? 1 : -1;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::graph::wait()");
  }
  return -1;
}

int vckattn_graph_end(void* handle) {
  try {
    static_cast<shim_graph*>(handle)->graph.end();
    return 0;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::graph::end()");
  }
  return -1;
}

void vckattn_graph_close(void* handle) {
  try {
    delete static_cast<shim_graph*>(handle);
  } catch (...) {
  }
}

// ------------------------------------------------------------------- user-managed kernel IP

void* vckattn_ip_open(unsigned int device_index, const unsigned char* xclbin_uuid, const char* name) {
  try {
    xrt::device device(device_index);
    xrt::ip ip(device, make_uuid(xclbin_uuid), std::string(name));
    return new shim_ip{device, ip};
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::ip()");
  }
  return nullptr;
}

int vckattn_ip_read(void* handle, uint32_t offset, uint32_t* value) {
  try {
    *value = static_cast<shim_ip*>(handle)->ip.read_register(offset);
    return 0;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::ip::read_register()");
  }
  return -1;
}

int vckattn_ip_write(void* handle, uint32_t offset, uint32_t value) {
  try {
    static_cast<shim_ip*>(handle)->ip.write_register(offset, value);
    return 0;
  } catch (const std::exception& e) {
    set_error(e.what());
  } catch (...) {
    set_error("unknown C++ exception in xrt::ip::write_register()");
  }
  return -1;
}

void vckattn_ip_close(void* handle) {
  try {
    delete static_cast<shim_ip*>(handle);
  } catch (...) {
  }
}

}  // extern "C"
