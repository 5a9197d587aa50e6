// tpu_ici_pkg: types and helpers of the inter-chip interconnect (ICI): the flit, the packet header,
// the packet types, the port numbering, the run-time topology and the dimension-order route.
//
// Compile-time shape: CoordW bits per coordinate (rings of up to MaxK = 16 nodes per dimension:
// 16x16x16 = 4096 chips, a TPU v4 pod),
// IciDataW bits of flit payload. The header of a packet lives in the low bits of its head flit.
// The router modules take `parameter type flit_t = ici_flit_t`: any packed struct with fields
// `head`, `tail` and `data` (data at least $bits(ici_hdr_t) wide) works, so the flit width is a
// parameter of the router; the defaults below are what the C++ harness (tb/ici) drives.
package tpu_ici_pkg;

  // ---- Compile-time shape ----
  localparam int unsigned CoordW = 4;              // bits per coordinate
  localparam int unsigned MaxK = 1 << CoordW;      // largest ring per dimension (16)
  // A link's pacing counter (link_gap_i of the router and the link layer): a link carries a flit
  // every 1 .. 2^LinkGapW - 1 cycles, slow enough for the scale models' links (v4: 688 cycles
  // per 64-byte flit, docs/scale_models.md).
  localparam int unsigned LinkGapW = 10;
  localparam int unsigned NumDims = 3;             // X, Y, Z
  localparam int unsigned NumDirs = 2 * NumDims;   // +X -X +Y -Y +Z -Z
  localparam int unsigned NumPorts = NumDirs + 1;  // local + one per direction
  localparam int unsigned PortW = 3;
  localparam int unsigned IciDataW = 64;           // flit payload bits
  localparam int unsigned StatW = 32;              // statistics counters (wrap around)

  // Router ports. Port PORT_XP connects to the neighbour at x+1 (flits leave on it going +X and
  // arrive on it from that neighbour, travelling -X); direction d (0..5) is port d + 1. NumPorts
  // counts one local port; a router with a second one (PORT_LOCAL1) has NumPorts + 1.
  typedef enum logic [PortW-1:0] {
    PORT_LOCAL = 3'd0,
    PORT_XP    = 3'd1,
    PORT_XM    = 3'd2,
    PORT_YP    = 3'd3,
    PORT_YM    = 3'd4,
    PORT_ZP    = 3'd5,
    PORT_ZM    = 3'd6,
    PORT_LOCAL1 = 3'd7  // a router's second local port (tpu_ici_router LocalPorts = 2)
  } ici_port_e;

  // A coordinate: [0] = x, [1] = y, [2] = z.
  typedef logic [NumDims-1:0][CoordW-1:0] ici_coord_t;

  // Packet types (4 bits: values 5..15 are free for later protocols).
  typedef enum logic [3:0] {
    ICI_WRITE    = 4'd0,  // remote write: addr = destination byte address, payload = data
    ICI_CNT_INC  = 4'd1,  // counter increment: addr = counter id, payload (optional) = amount
    ICI_READ_REQ = 4'd2,  // reserved: remote read request
    ICI_READ_RSP = 4'd3,  // reserved: remote read response
    ICI_BARRIER  = 4'd4   // reserved: barrier token
  } ici_type_e;

  // A direction hint for ties (ici_route): software that plans a transfer along one direction of
  // a ring (a collective's +1 / -1 step) names it, since on a 2-ring both directions reach the
  // same neighbour and the parity rule would put every such packet on one of the two links.
  // Bit 0 valid, bit 1 minus: ICI_SEND's flags[2] and flags[3], header bits [18] and [19].
  typedef struct packed {
    logic minus;  // the hinted way: 1 = -, 0 = +
    logic valid;  // a tie (distance k/2 on a ring) goes the hinted way, not by parity
  } ici_tie_t;

  // The header, carried in data[63:0] of a head flit. `len` counts the payload flits that follow
  // the head (0 = a single-flit packet whose head is also its tail). The routers read `dst` and
  // `tie` only. 26 address bits leave room for 3 x 4-bit coordinates in 64 bits (the chip's ICI
  // engine uses 25: a counter, a memory and a row). tb/common/ici_fields.h mirrors it for C++.
  typedef struct packed {
    logic [25:0] addr;
    logic [7:0]  len;
    ici_type_e   ptype;
    ici_tie_t    tie;    // direction hint for ties (zero: the parity rule); was reserved
    ici_coord_t  src;
    ici_coord_t  dst;
  } ici_hdr_t;

  // One flit on a link or the local port. The VC travels beside it (link sideband), not in it.
  // Link-layer room: a CRC over {head, tail, data} and a sequence number for go-back-N
  // retransmission will be a link wrapper around this struct (docs/ici.md), not router state.
  typedef struct packed {
    logic                head;  // first flit of a packet: data holds an ici_hdr_t
    logic                tail;  // last flit of a packet (head and tail: a one-flit packet)
    logic [IciDataW-1:0] data;
  } ici_flit_t;

  // Run-time topology: the same build serves any pod shape up to MaxK per dimension.
  // `twist` (docs/topology.md): a twisted torus, whose wrap links shift other coordinates by half
  // their ring: bit TwXY, X's wrap link (k_x - 1 -> 0 going +X) also adds k_y / 2 to y; TwXZ,
  // it adds k_z / 2 to z; TwYZ, Y's wrap link adds k_z / 2 to z (mod k, both ways: half a ring).
  // k x k x 2k twists X and Y into Z (TwXZ, TwYZ), k x 2k x 2k X into Y and Z (TwXY, TwXZ),
  // k x 2k (2D) X into Y (TwXY). Zero: the plain torus, routed by the plain rule bit for bit.
  typedef struct packed {
    logic [2:0]                    twist;        // {TwYZ, TwXZ, TwXY}; every dimension a ring
    logic                          no_dateline;  // debug: every hop in class 0 (can deadlock)
    logic [NumDims-1:0]            wrap;         // per dimension: 1 = ring (torus), 0 = line (mesh)
    logic [NumDims-1:0][CoordW:0]  k;            // nodes per dimension, 1..MaxK
  } ici_topo_t;

  localparam int unsigned TwXY = 0;
  localparam int unsigned TwXZ = 1;
  localparam int unsigned TwYZ = 2;

  // The output port and the VC class of the next hop.
  typedef struct packed {
    ici_port_e port;
    logic      cls;
  } ici_route_t;

  // Statistics of one (port, VC) of a router.
  typedef enum logic [1:0] {
    ICI_ST_FLITS_IN  = 2'd0,  // flits written into this input VC
    ICI_ST_FLITS_OUT = 2'd1,  // flits sent on this output VC (local port: ejected flits, VC 0)
    ICI_ST_STALL     = 2'd2,  // cycles this input VC held a flit that did not move
    ICI_ST_LOST      = 2'd3   // of those, cycles it could have moved (credit, free VC) but the
                              // allocator gave its input or its output to another flit
  } ici_stat_e;

  // The destination of a header from the low bits of a head flit's data: `dst` is the least
  // significant field of ici_hdr_t.
  localparam int unsigned DstW = $bits(ici_coord_t);
  function automatic ici_coord_t hdr_dst(logic [DstW-1:0] low_bits);
    return ici_coord_t'(low_bits);
  endfunction
  // The tie hint of a header: the field above `src` (bits [19:18] of a head flit's data).
  localparam int unsigned TieLsb = 2 * DstW;
  localparam int unsigned TieW = $bits(ici_tie_t);
  function automatic ici_tie_t hdr_tie(logic [TieW-1:0] tie_bits);
    return ici_tie_t'(tie_bits);
  endfunction

  function automatic int unsigned vc_width(int unsigned num_vc);
    return (num_vc > 1) ? $clog2(num_vc) : 1;
  endfunction

  // (c + k / 2) mod k for a coordinate c < k of an even ring k: the shift of a twisted wrap link.
  function automatic logic [CoordW:0] half_turn(logic [CoordW:0] c, logic [CoordW:0] k);
    logic [CoordW:0] s;
    s = c + (k >> 1);
    return (s >= k) ? s - k : s;
  endfunction

  // Twisted torus route (topo.twist != 0; docs/topology.md "Routing"). The network is a Cayley
  // graph of an abelian group, so a shortest path can be taken in dimension order: per dimension
  // d either the direct way (no wrap link) or round through the wrap link once (which shifts the
  // later dimensions it twists into by half their ring), then the plain way in the next. The
  // eight choices w (bit d: cross d's wrap link) are costed in full (the hops of every dimension,
  // with the shifts the earlier crossings make) and the cheapest wins; on equal cost, the one
  // without a full loop (w_d with the coordinate already right: k_d hops round, worth it only
  // when its shift saves more) in the earliest dimension, then w XOR the parity of the
  // destination's z, compared from X (which spreads ties over both ways: measured the best of
  // the rules tried for link balance). After the first hop of a dimension the chosen way is
  // strictly the shortest, so a packet keeps one direction through each dimension and visits
  // X, Y, Z in order; the loop preference stops a packet that has finished a dimension from
  // looping in it again. The VC class is the plain rule's (class 0 while the wrap link of the
  // dimension is still ahead), which keeps each dimension's links free of cyclic dependencies.
  function automatic ici_route_t ici_route_twist(ici_coord_t me, ici_coord_t dst,
                                                 ici_topo_t topo);
    ici_route_t r;
    logic [NumDims-1:0][CoordW:0] p;
    logic [NumDims-1:0] w, loops, out;
    logic [CoordW:0] k, t, h;
    logic [5:0] cost, best_cost;
    logic [2:0] best_loops, best_tie, tie_bits;
    logic valid, first, pl, best_found;
    out = {1'b0, topo.twist[TwYZ], topo.twist[TwXY] | topo.twist[TwXZ]};
    r.port = PORT_LOCAL;
    r.cls = 1'b0;
    best_cost = '1;
    best_loops = '1;
    best_tie = '1;
    best_found = 1'b0;
    for (int unsigned o = 0; o < 8; o++) begin
      ici_route_t cand;
      w = NumDims'(o);
      for (int unsigned d = 0; d < NumDims; d++) p[d] = {1'b0, me[d]};
      cost = '0;
      loops = '0;
      valid = 1'b1;
      first = 1'b0;
      cand = '0;
      cand.port = PORT_LOCAL;
      for (int unsigned d = 0; d < NumDims; d++) begin
        k = topo.k[d];
        t = {1'b0, dst[d]};
        h = (t >= p[d]) ? t - p[d] : p[d] - t;
        pl = t > p[d];
        if (w[d]) begin
          if (k < 2 || !topo.wrap[d] || (p[d] == t && !out[d])) valid = 1'b0;
          loops[d] = (p[d] == t);
          pl = (p[d] == t) || (t < p[d]);
          h = k - h;  // k - |t - p|: a full loop (k hops) when p == t
        end
        if (h != '0 && !first) begin
          first = 1'b1;
          cand.port = ici_port_e'(PortW'(1 + 2 * d + (pl ? 0 : 1)));
          cand.cls = pl ? (p[d] < t) : (p[d] > t);
        end
        cost = cost + 6'(h);
        if (w[d] && d == 0) begin
          if (topo.twist[TwXY]) p[1] = half_turn(p[1], topo.k[1]);
          if (topo.twist[TwXZ]) p[2] = half_turn(p[2], topo.k[2]);
        end
        if (w[d] && d == 1 && topo.twist[TwYZ]) p[2] = half_turn(p[2], topo.k[2]);
      end
      tie_bits = {w[0], w[1], w[2]} ^ {3{dst[2][0]}};
      if (valid && (!best_found || cost < best_cost ||
                    (cost == best_cost && {loops[0], loops[1], loops[2]} < best_loops) ||
                    (cost == best_cost && {loops[0], loops[1], loops[2]} == best_loops &&
                     tie_bits < best_tie))) begin
        best_found = 1'b1;
        best_cost = cost;
        best_loops = {loops[0], loops[1], loops[2]};
        best_tie = tie_bits;
        r = cand;
      end
    end
    if (topo.no_dateline) r.cls = 1'b0;
    return r;
  endfunction

  // Dimension-order route (X, then Y, then Z), the shorter way round each ring (a twisted torus:
  // ici_route_twist above). A tie (possible
  // on even rings, at distance k/2) goes + when the destination coordinate is even and - when it
  // is odd: sending every tie + loads the + links of a 4-ring with 3 of every 4 hops under
  // uniform traffic; the parity rule gives every link of both directions the same load. With a
  // valid `tie` hint (the packet's header) a tie goes the hinted way instead, in every ring
  // dimension. A tie only exists at the first hop of a dimension (after it the rest of the way
  // is shorter than k/2 in the direction taken), so the route stays a function of (source,
  // destination, hint) and the packets of a pair with one hint stay in order.
  // VC class on a ring (dateline at the wrap link, k-1 -> 0 going + and 0 -> k-1 going -): a
  // packet that still has to cross the wrap link of this dimension travels in class 0, up to and
  // including the wrap link; every other hop of the dimension is class 1 (the hops after the
  // crossing and the whole way of a packet that never crosses). Both classes only ever step
  // towards the dateline-free end of the ring, so neither has a cyclic channel dependency; the
  // class is a function of (here, destination, direction), so no per-packet state is needed.
  // Either way of a tie is a minimal route that keeps its direction to the end of the dimension,
  // so a hinted tie obeys the same class rules.
  // On a line (mesh) there is no cycle at all: the class is a parity of the destination, which
  // spreads packets over both classes and keeps a source/destination pair on one VC sequence.
  function automatic ici_route_t ici_route(ici_coord_t me, ici_coord_t dst, ici_topo_t topo,
                                           ici_tie_t tie);
    ici_route_t r;
    logic [CoordW:0] c, t, k, delta;
    logic plus, found, tie_plus;
    if (topo.twist != '0) return ici_route_twist(me, dst, topo);  // ignores the tie hint
    r.port = PORT_LOCAL;
    r.cls = 1'b0;
    found = 1'b0;
    tie_plus = 1'b0;
    for (int unsigned d = 0; d < NumDims; d++) begin
      c = {1'b0, me[d]};
      t = {1'b0, dst[d]};
      k = topo.k[d];
      if (!found && c != t) begin
        found = 1'b1;
        if (topo.wrap[d]) begin
          delta = (t >= c) ? t - c : t + k - c;
          // a tie (delta = k/2) goes the hinted way, else + towards an even coordinate and -
          // towards an odd one
          tie_plus = tie.valid ? !tie.minus : !t[0];
          plus = ({delta, 1'b0} < {1'b0, k}) || ({delta, 1'b0} == {1'b0, k} && tie_plus);
          r.cls = plus ? (c < t) : (c > t);
        end else begin
          plus = (t > c);
          r.cls = dst[0][0] ^ dst[1][0] ^ dst[2][0];
        end
        if (topo.no_dateline) r.cls = 1'b0;
        r.port = ici_port_e'(PortW'(1 + 2 * d + (plus ? 0 : 1)));
      end
    end
    return r;
  endfunction

  // A small hash of a destination, used to pick a VC within a class (and the local input VC):
  // deterministic, so one source/destination pair always uses the same VCs (in-order delivery).
  function automatic int unsigned dst_hash(ici_coord_t dst);
    return int'(dst[0]) + int'(dst[1]) + int'(dst[2]);
  endfunction

  // ---- Link layer (tpu_ici_link_tx / tpu_ici_link_rx, docs/ici.md "Link layer") ----
  // A flit word on the wire carries {seq, vc, flit} and a CRC-32C of them; the control word that
  // comes back carries the cumulative ACK (the next sequence number the receiver expects), a NAK
  // bit and, per VC, the receiver's count of credits returned (mod 2^LinkCntW), with its own
  // CRC-32C. LinkSeqW covers twice the largest replay buffer (64 flits: 4 VCs x 16).
  localparam int unsigned LinkSeqW = 8;
  localparam int unsigned LinkCntW = 5;  // > log2(Depth): a VC never owes more than Depth
  function automatic int unsigned link_ctl_width(int unsigned num_vc);
    return LinkSeqW + 1 + num_vc * LinkCntW;
  endfunction
  // Per-link counters (the link stat port of tpu_chip).
  typedef enum logic [2:0] {
    LINK_ST_CRC_ERR  = 3'd0,  // flit words received on this port whose CRC failed
    LINK_ST_CTL_ERR  = 3'd1,  // control words for this port's flits whose CRC failed
    LINK_ST_REPLAYS  = 3'd2,  // replays started (a NAK or a time-out)
    LINK_ST_REPLAYED = 3'd3,  // flits sent again
    LINK_ST_DOWN     = 3'd4   // 1: this port's outgoing link was declared down
  } link_stat_e;

endpackage
