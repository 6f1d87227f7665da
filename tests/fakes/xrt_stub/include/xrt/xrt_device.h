// STUB stand-in for XRT 2022.2 <xrt/xrt_device.h> (tests/fakes/xrt_stub: no XRT here). Same names and
// signatures as the documented API the shim uses; the stub library (../xrt_stub.cpp) defines them.
#ifndef VCKATTN_STUB_XRT_DEVICE_H_
#define VCKATTN_STUB_XRT_DEVICE_H_
#include <memory>
#include <string>

#include "xrt/xrt_uuid.h"

namespace xrt {
class device_impl;
class device {
 public:
  device();
  explicit device(unsigned int didx);
  explicit device(const std::string& bdf);
  uuid load_xclbin(const std::string& xclbin_fnm);
  uuid get_xclbin_uuid() const;
  unsigned int index() const;  // stub only: the index it was opened with

 private:
  std::shared_ptr<device_impl> handle;
};
}  // namespace xrt
#endif
