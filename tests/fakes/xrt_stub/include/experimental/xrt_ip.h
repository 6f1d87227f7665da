// STUB stand-in for XRT 2022.2 <experimental/xrt_ip.h> (tests/fakes/xrt_stub: no XRT here). Same names and
// signatures as the documented API the shim uses; the stub library (../../xrt_stub.cpp) defines them.
#ifndef VCKATTN_STUB_XRT_IP_H_
#define VCKATTN_STUB_XRT_IP_H_
#include <cstdint>
#include <memory>
#include <string>

#include "xrt/xrt_device.h"
#include "xrt/xrt_uuid.h"

namespace xrt {
class ip_impl;
class ip {
 public:
  ip();
  ip(const xrt::device& device, const xrt::uuid& xclbin_id, const std::string& name);
  void write_register(uint32_t offset, uint32_t data);
  uint32_t read_register(uint32_t offset) const;

 private:
  std::shared_ptr<ip_impl> handle;
};
}  // namespace xrt
#endif
