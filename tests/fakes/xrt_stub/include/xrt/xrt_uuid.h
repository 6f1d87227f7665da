// STUB stand-in for XRT 2022.2 <xrt/xrt_uuid.h> (tests/fakes/xrt_stub: no XRT here). Same names and
// signatures as the documented API the shim uses; the stub library (../xrt_stub.cpp) defines the rest.
#ifndef VCKATTN_STUB_XRT_UUID_H_
#define VCKATTN_STUB_XRT_UUID_H_
#include <cstring>
#include <string>

typedef unsigned char xuid_t[16];

namespace xrt {
class uuid {
 public:
  uuid() { std::memset(m_uuid, 0, sizeof(m_uuid)); }
  explicit uuid(const xuid_t val) { std::memcpy(m_uuid, val, sizeof(m_uuid)); }
  explicit uuid(const std::string& uuid_str);
  const xuid_t& get() const { return m_uuid; }
  std::string to_string() const;

 private:
  xuid_t m_uuid;
};
}  // namespace xrt
#endif
