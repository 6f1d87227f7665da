// mm2s_list.h -- the sublayer's generic list mover (hw/hls/mm2s_list.cpp): a command list in DDR -> one AXI4-Stream
// with TLAST, each command a header beat and / or a run of beats of a source buffer. Serves as the sublayer's X mover,
// weight mover and descriptor mover (hw/ENGINE.md "The sublayer's PL side").
//
// A command is 32 bytes = two 128-bit beats: beat 0 is the header beat, sent as it is; beat 1 is an MDESC
// (hw/spec/streams.py, through ../aie/generated/engine_streams.h): the payload's byte offset into src (words 0-1, one
// little-endian uint64), its length in beats (word 2), no_header (word 3 bit 0: send the payload only) and more
// (word 3 bit 1: the next command continues the packet). TLAST is set on the last beat each command sends, unless
// more.
#ifndef VCKATTN_MM2S_LIST_H
#define VCKATTN_MM2S_LIST_H

#include <ap_axi_sdata.h>
#include <ap_int.h>
#include <hls_stream.h>

namespace vckattn_list {
using beat128 = ap_uint<128>;          // a DDR beat: a command half or a source beat
using axis128 = ap_axiu<128, 0, 0, 0>;  // a stream beat: data, keep, strb, last
}  // namespace vckattn_list

// Sends commands 0 .. n_cmds - 1 of cmds (2 beats each) in order; payloads from src (src_beats beats long). Returns
// the number of commands sent before the first refused one (n_cmds when every command is good). A command is
// refused, and nothing of it sent, when its offset is not a whole beat, its payload runs past src_beats, or it would
// send nothing (no_header with 0 beats).
unsigned mm2s_list(const vckattn_list::beat128* cmds, unsigned n_cmds, const vckattn_list::beat128* src,
                   unsigned long long src_beats, hls::stream<vckattn_list::axis128>& out);

#endif  // VCKATTN_MM2S_LIST_H
