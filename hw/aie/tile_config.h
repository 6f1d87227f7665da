// Tile shape and local-memory workspaces of the AIE matmul kernels (hw/STREAMS.md, v1).
//
// Plain C++ (only <cstdint>): included by the kernels (attention_kernels.h, compiled by the AIE
// compiler or by g++ for the test bench) and by the graph (graph.h, compiled by the aiecompiler
// front end), so the graph can size each kernel's heap from the same structs the kernels use.
//
// Units: *_ROWS, KEY_BLOCK, D are element counts; *_BYTES are bytes.
#ifndef VCKATTN_AIE_TILE_CONFIG_H
#define VCKATTN_AIE_TILE_CONFIG_H

#include <cstdint>

namespace vckattn_aie {

// Build parameters (hw/STREAMS.md): 32 query rows a tile, 32 keys a block, head size <= 64,
// at most 1024 padded keys (32 blocks).
constexpr int Q_ROWS = 32;
constexpr int KEY_BLOCK = 32;
constexpr int MAX_D = 64;
constexpr int MAX_KB = 32;

// One 128-bit PLIO beat: 16 int8 / 16 uint8 / 4 int32.
constexpr int BEAT_BYTES = 16;

// Compile-time tile shape. Q_ROWS_, KEY_BLOCK_: rows of Q (and S, P, O) and keys per block;
// MAX_D_: the largest head size accepted (D must be a multiple of 16, 16 <= D <= MAX_D_);
// MAX_KB_: the most key blocks a tile may have (bounds the P.V int32 accumulator:
// 255 * 128 * KEY_BLOCK * MAX_KB must stay below 2^31).
template <int Q_ROWS_, int KEY_BLOCK_, int MAX_D_, int MAX_KB_>
struct TileShape {
    static constexpr int Q_ROWS = Q_ROWS_;
    static constexpr int KEY_BLOCK = KEY_BLOCK_;
    static constexpr int MAX_D = MAX_D_;
    static constexpr int MAX_KB = MAX_KB_;

    static_assert(Q_ROWS_ > 0 && Q_ROWS_ % 4 == 0, "Q_ROWS must be a positive multiple of 4 (S/O beats)");
    static_assert(KEY_BLOCK_ > 0 && KEY_BLOCK_ % 16 == 0, "KEY_BLOCK must be a positive multiple of 16 (P beats)");
    static_assert(MAX_D_ >= 16 && MAX_D_ % 16 == 0, "MAX_D must be a positive multiple of 16");
    static_assert(MAX_KB_ >= 1, "MAX_KB must be >= 1");
    static_assert(255LL * 128 * KEY_BLOCK_ * MAX_KB_ < (1LL << 31), "P.V may overflow the int32 accumulator");
};

using DefaultShape = TileShape<Q_ROWS, KEY_BLOCK, MAX_D, MAX_KB>;

// QK^T kernel state, all row-major unless said otherwise (32-byte aligned for 256-bit vector
// loads). Only q, k and s are used by the scalar path; qt is the vector path's re-tiled Q^T.
template <class Shape>
struct QkWorkspace {
    alignas(32) int8_t q[Shape::Q_ROWS * Shape::MAX_D];       // Q, Q_ROWS x D (row stride D)
    alignas(32) int8_t qt[Shape::Q_ROWS * Shape::MAX_D];      // Q^T in 16x8 tiles (vector path)
    alignas(32) int8_t k[Shape::KEY_BLOCK * Shape::MAX_D];    // one K block, KEY_BLOCK x D
    alignas(32) int32_t s[Shape::Q_ROWS * Shape::KEY_BLOCK];  // one S block, Q_ROWS x KEY_BLOCK
};

// P.V kernel state. o is the running int32 accumulator, zeroed at the start of every tile.
// vt is the vector path's re-tiled V block.
template <class Shape>
struct PvWorkspace {
    alignas(32) uint8_t p[Shape::Q_ROWS * Shape::KEY_BLOCK];  // one P block, Q_ROWS x KEY_BLOCK
    alignas(32) int8_t v[Shape::KEY_BLOCK * Shape::MAX_D];    // one V block, KEY_BLOCK x D
    alignas(32) int8_t vt[Shape::KEY_BLOCK * Shape::MAX_D];   // V in 16x8 tiles (vector path)
    alignas(32) int32_t o[Shape::Q_ROWS * Shape::MAX_D];      // O accumulator, Q_ROWS x D
};

// Data memory the kernels keep as file-scope statics (the AIE compiler places them in the
// kernel's heap section; graph.h sets heap_size from these). 10 KiB and 13 KiB of the tile's 32 KiB.
constexpr int QK_WORKSPACE_BYTES = static_cast<int>(sizeof(QkWorkspace<DefaultShape>));
constexpr int PV_WORKSPACE_BYTES = static_cast<int>(sizeof(PvWorkspace<DefaultShape>));
// Heap left over for the runtime besides the workspace (the default heap is 1024 bytes).
constexpr int HEAP_SLACK_BYTES = 1024;

}  // namespace vckattn_aie

#endif
