// The ICI fields the C++ harnesses write into and read from the RTL, packed as
// rtl/tpu_ici_pkg.sv packs them: the coordinate (ici_coord_t), the pod shape (ici_topo_t) and a
// packet's header (ici_hdr_t, data[63:0] of a head flit). One place in C++: a change of
// tpu_ici_pkg::CoordW or of the header is made here and there (tests/ici and tests/chip fail
// otherwise: every packet would go astray).
#pragma once

#include <array>
#include <cstdint>

namespace tpu {

constexpr unsigned kIciCoordW = 4;                  // tpu_ici_pkg::CoordW
constexpr unsigned kIciMaxK = 1u << kIciCoordW;     // nodes per dimension (tpu_ici_pkg::MaxK): 16
constexpr unsigned kIciCoordBits = 3 * kIciCoordW;  // $bits(ici_coord_t)
constexpr unsigned kIciLinkGapW = 10;               // tpu_ici_pkg::LinkGapW
// The slowest link: a flit every kIciLinkGapMax cycles (the link's pacing counter).
constexpr unsigned kIciLinkGapMax = (1u << kIciLinkGapW) - 1;

// {z, y, x}, x in the low bits.
inline uint64_t ici_pack_coord(const std::array<unsigned, 3>& c) {
  uint64_t v = 0;
  for (unsigned d = 0; d < 3; ++d) v |= uint64_t{c[d] & (kIciMaxK - 1)} << (kIciCoordW * d);
  return v;
}
inline std::array<unsigned, 3> ici_unpack_coord(uint64_t v) {
  std::array<unsigned, 3> c{};
  for (unsigned d = 0; d < 3; ++d)
    c[d] = static_cast<unsigned>((v >> (kIciCoordW * d)) & (kIciMaxK - 1));
  return c;
}
// ici_topo_t.k: CoordW + 1 bits per dimension (1..MaxK), x in the low bits.
inline uint64_t ici_pack_k(const std::array<unsigned, 3>& k) {
  uint64_t v = 0;
  for (unsigned d = 0; d < 3; ++d) v |= uint64_t{k[d] & (2 * kIciMaxK - 1)} << ((kIciCoordW + 1) * d);
  return v;
}
// The whole ici_topo_t: {twist[2:0], no_dateline, wrap[2:0], k}; `twist` as tpu::twist_bits()
// (model/include/tpu/twisted_torus.h) gives it, 0 for a plain torus.
inline uint64_t ici_pack_topo(const std::array<unsigned, 3>& k, const std::array<bool, 3>& wrap,
                              bool no_dateline, unsigned twist = 0) {
  uint64_t v = ici_pack_k(k);
  const unsigned kbits = 3 * (kIciCoordW + 1);
  for (unsigned d = 0; d < 3; ++d) v |= uint64_t{wrap[d] ? 1u : 0u} << (kbits + d);
  v |= uint64_t{twist & 7u} << (kbits + 4);
  return v | (uint64_t{no_dateline ? 1u : 0u} << (kbits + 3));
}

// ici_hdr_t {addr[25:0], len[7:0], ptype[3:0], tie[1:0], src, dst}, dst in the low bits.
struct IciHeader {
  uint32_t addr = 0;  // 26 bits
  unsigned len = 0;   // payload flits after the head
  unsigned ptype = 0;
  unsigned tie = 0;   // {minus, valid}
  uint64_t src = 0, dst = 0;  // packed coordinates
};
constexpr unsigned kIciAddrBits = 64 - 2 * kIciCoordBits - 2 - 4 - 8;  // 26
inline uint64_t ici_pack_header(const IciHeader& h) {
  unsigned at = 0;
  uint64_t v = h.dst;
  v |= h.src << (at += kIciCoordBits);
  v |= uint64_t{h.tie & 3u} << (at += kIciCoordBits);
  v |= uint64_t{h.ptype & 15u} << (at += 2);
  v |= uint64_t{h.len & 255u} << (at += 4);
  v |= uint64_t{h.addr & ((1u << kIciAddrBits) - 1)} << (at += 8);
  return v;
}
inline IciHeader ici_unpack_header(uint64_t v) {
  const uint64_t cm = (uint64_t{1} << kIciCoordBits) - 1;
  IciHeader h;
  unsigned at = 0;
  h.dst = v & cm;
  h.src = (v >> (at += kIciCoordBits)) & cm;
  h.tie = static_cast<unsigned>((v >> (at += kIciCoordBits)) & 3u);
  h.ptype = static_cast<unsigned>((v >> (at += 2)) & 15u);
  h.len = static_cast<unsigned>((v >> (at += 4)) & 255u);
  h.addr = static_cast<uint32_t>(v >> (at += 8));
  return h;
}

}  // namespace tpu
