// STUB stand-in for XRT 2022.2 <experimental/xrt_graph.h> (tests/fakes/xrt_stub: no XRT here). Same names and
// signatures as the documented API the shim uses; the stub library (../../xrt_stub.cpp) defines them.
#ifndef VCKATTN_STUB_XRT_GRAPH_H_
#define VCKATTN_STUB_XRT_GRAPH_H_
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "xrt/xrt_device.h"
#include "xrt/xrt_uuid.h"

namespace xrt {
class graph_impl;
class graph {
 public:
  enum class access_mode : uint8_t { exclusive = 0, primary = 1, shared = 2 };
  graph(const xrt::device& device, const xrt::uuid& xclbin_id, const std::string& name,
        access_mode am = access_mode::primary);
  void reset() const;
  uint64_t get_timestamp() const;
  void run(uint32_t iterations = 0);
  void wait(std::chrono::milliseconds timeout_ms);
  void wait(uint64_t cycles = 0);
  void suspend();
  void resume();
  void end(uint64_t cycles = 0);

 private:
  std::shared_ptr<graph_impl> handle;
};
}  // namespace xrt
#endif
