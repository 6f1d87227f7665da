// The async input buffer adapter both engine kernel families use (the K / V slices of qk_slice / pv_slice, the
// w buffer of gemm_proj): a buffer the kernel acquires itself at the first tile that needs it and releases after
// its last. Concept: acquire() waits for the next buffer and returns its bytes (header first; g++: nullptr when
// none will come, the AI Engine would wait), current() the buffer held, release() gives it back to the DMA.
// Include after the kernel header has set VCKATTN_AIE_ADF (and, on the AI Engine, included <adf.h>).
#ifndef VCKATTN_AIE_ENGINE_ASYNC_BUFFER_H
#define VCKATTN_AIE_ENGINE_ASYNC_BUFFER_H

#include <cstddef>
#include <cstdint>

#if !VCKATTN_AIE_ADF
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>
#endif

namespace vckattn_async {

#if VCKATTN_AIE_ADF
// UNVERIFIED (no aiecompiler on this project's machines): written against the ADF window API of Vitis
// 2022.2 (AIE1). The graph declares the window input async (adf::async), so the kernel acquires and
// releases it itself; a window's data is reached through its current pointer.
#define VCKATTN_WINDOW_DATA(w) reinterpret_cast<uint8_t*>((w)->ptr)

class AdfAsyncIn {
public:
    explicit AdfAsyncIn(input_window<int8>* w) : w_(w) {}
    const uint8_t* acquire() {
        window_acquire(w_);
        return current();
    }
    const uint8_t* current() const { return VCKATTN_WINDOW_DATA(w_); }
    void release() { window_release(w_); }

private:
    input_window<int8>* w_;
};

#else  // g++

// The async buffers one kernel receives, in order: each a 64-byte aligned copy.
class HostAsyncIn {
public:
    void push(const uint8_t* bytes, std::size_t n) {
        void* mem = nullptr;
        if (posix_memalign(&mem, 64, n) != 0) std::abort();
        std::memcpy(mem, bytes, n);
        bufs_.emplace_back(static_cast<uint8_t*>(mem));
    }
    const uint8_t* acquire() {
        if (next_ >= bufs_.size()) return nullptr;
        held_ = bufs_[next_++].get();
        return held_;
    }
    const uint8_t* current() const { return held_; }
    void release() {
        held_ = nullptr;
        ++released_;
    }
    std::size_t remaining() const { return bufs_.size() - next_; }  // never acquired
    std::size_t held() const { return next_ - released_; }          // acquired, not released

private:
    struct Free {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::vector<std::unique_ptr<uint8_t, Free> > bufs_;
    std::size_t next_ = 0;
    std::size_t released_ = 0;
    const uint8_t* held_ = nullptr;
};

#endif  // VCKATTN_AIE_ADF

}  // namespace vckattn_async

#endif
