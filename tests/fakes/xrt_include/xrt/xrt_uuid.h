// FAKE stand-in for XRT 2022.2 <xrt/xrt_uuid.h>: declarations only (syntax check of the shim).
#ifndef VCKATTN_FAKE_XRT_UUID_H_
#define VCKATTN_FAKE_XRT_UUID_H_
#include <string>

typedef unsigned char xuid_t[16];

namespace xrt {
class uuid {
 public:
  uuid();
  explicit uuid(const xuid_t val);
  explicit uuid(const std::string& uuid_str);
  std::string to_string() const;
};
}  // namespace xrt
#endif
