// FAKE stand-in for XRT 2022.2 <xrt/xrt_device.h>: declarations only (syntax check of the shim).
#ifndef VCKATTN_FAKE_XRT_DEVICE_H_
#define VCKATTN_FAKE_XRT_DEVICE_H_
#include <memory>
#include <string>

#include "xrt/xrt_uuid.h"

namespace xrt {
class xclbin;
class device_impl;
class device {
 public:
  device();
  explicit device(unsigned int didx);
  explicit device(const std::string& bdf);
  uuid load_xclbin(const std::string& xclbin_fnm);
  uuid get_xclbin_uuid() const;

 private:
  std::shared_ptr<device_impl> handle;
};
}  // namespace xrt
#endif
