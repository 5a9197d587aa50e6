// The chip matmul planner without RTL (sw/driver/matmul_plan.h): the tiler's choices, the
// VMEM/AMEM layout's bounds, the emitter's commands decoded for a small case, and the whole
// planner's command words pinned for a sweep of shapes on 4x4, 8x8 and 16x16 chips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "fake_host_port.h"

namespace tpu {
namespace {

// FNV-1a over 32-bit words.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  }
  void add(const std::string& s) {
    for (char c : s) add(static_cast<uint64_t>(static_cast<unsigned char>(c)));
  }
  void add(const std::vector<ChipCmd>& prog) {
    add(prog.size());
    for (const ChipCmd& c : prog)
      for (uint32_t w : c.w) add(w);
  }
};

// The sweep's shapes: every M x K x N of these on every variant.
const std::vector<std::size_t> kSweepM = {1, 45, 300, 700};
const std::vector<std::size_t> kSweepK = {16, 100, 300};
const std::vector<std::size_t> kSweepN = {8, 130, 520};

// The planner's output for one shape on one variant, in four modes (plain f32; plain bf16 with
// bias and ReLU; W transposed f32 with a bias; W transposed bf16 with ReLU in a VMEM limit of
// half the rows), and the transpose of A: the words of every command, m_chunk and the command
// count hashed (a shape that does not fit hashes its error message instead).
uint64_t sweep_hash(const std::string& variant, std::size_t m, std::size_t k, std::size_t n) {
  FakeHostPort port(Topology::mesh({1}), variant);
  ChipDriver drv(port, 0);
  Fnv f;
  for (int mode = 0; mode < 4; ++mode) {
    const bool wt = mode >= 2, bf16 = mode % 2 == 1;
    const uint64_t mark = drv.allocated();
    drv.vmem_rows_limit = mode == 3 ? drv.shape().vmem_rows / 2 : 0;
    try {
      const HbmMatrix a = drv.alloc_matrix(m, k, Dtype::kBf16);
      const HbmMatrix w = wt ? drv.alloc_matrix(n, k, Dtype::kBf16)
                             : drv.alloc_matrix(k, n, Dtype::kBf16);
      const HbmMatrix c = drv.alloc_matrix(m, n, bf16 ? Dtype::kBf16 : Dtype::kF32);
      const HbmMatrix bias = drv.alloc_matrix(1, n, Dtype::kF32);
      MatmulEpilogue ep;
      ep.bias = mode == 1 || mode == 2 ? &bias : nullptr;
      ep.relu = mode == 1 || mode == 3;
      const MatmulRun r = drv.plan_matmul(c, a, w, ep, wt);
      f.add(r.program);
      f.add(r.m_chunk);
      f.add(r.commands);
      f.add(r.compute_cycles);
      if (mode == 0 && m <= 300) {
        const HbmMatrix at = drv.alloc_matrix(k, m, Dtype::kBf16);
        f.add(drv.plan_transpose(at, a));
      }
    } catch (const std::invalid_argument& e) {
      f.add(std::string(e.what()));
    }
    drv.release(mark);
  }
  return f.h;
}

struct Pinned {
  const char* variant;
  std::size_t m, k, n;
  uint64_t hash;
};

// The hashes of sweep_hash, computed by the planner before it was split into tiler, layout and
// emitter (ChipDriver::plan_matmul as one function, commit a798ad4; regenerate with
// TPU_PRINT_MATMUL_SWEEP=1 only for a change that means to alter the programs). The split must
// emit every command word the same, so each shape's hash must stay what it was.
const std::vector<Pinned> kPinned = {
    {"4x4", 1, 16, 8, 0x78c3d577e7a698ffull},
    {"4x4", 1, 16, 130, 0x597ed7d4395f8446ull},
    {"4x4", 1, 16, 520, 0x6ff24b2b89d13870ull},
    {"4x4", 1, 100, 8, 0xaea7c175e3b4d50bull},
    {"4x4", 1, 100, 130, 0x54bc71bd2ce595e0ull},
    {"4x4", 1, 100, 520, 0x14c6ad706aa46193ull},
    {"4x4", 1, 300, 8, 0x3c3eb935c0cdc8a0ull},
    {"4x4", 1, 300, 130, 0x3f7fa45cc9844583ull},
    {"4x4", 1, 300, 520, 0x008b9a0977472770ull},
    {"4x4", 45, 16, 8, 0xe27c27355664d7cfull},
    {"4x4", 45, 16, 130, 0x051b8391edd5737dull},
    {"4x4", 45, 16, 520, 0xfc2defdea9366cebull},
    {"4x4", 45, 100, 8, 0xc95cbc2af1562482ull},
    {"4x4", 45, 100, 130, 0x4694d111420cf7deull},
    {"4x4", 45, 100, 520, 0xa070a533c22a7904ull},
    {"4x4", 45, 300, 8, 0x488888d598c75f24ull},
    {"4x4", 45, 300, 130, 0xb4bc2552f251878cull},
    {"4x4", 45, 300, 520, 0x7288c189495904bbull},
    {"4x4", 300, 16, 8, 0x7f01333cf25dc031ull},
    {"4x4", 300, 16, 130, 0xb103a61a39e3dedeull},
    {"4x4", 300, 16, 520, 0x06b55ce24617ab05ull},
    {"4x4", 300, 100, 8, 0x6584288d913fdae0ull},
    {"4x4", 300, 100, 130, 0x660cf3c0c96dca9aull},
    {"4x4", 300, 100, 520, 0x0ec92e4cdefb8a4full},
    {"4x4", 300, 300, 8, 0x25c38b5990113580ull},
    {"4x4", 300, 300, 130, 0xa60cb4693fef1d6eull},
    {"4x4", 300, 300, 520, 0x0452261bf2c16866ull},
    {"4x4", 700, 16, 8, 0x3ae593ae30320d95ull},
    {"4x4", 700, 16, 130, 0xa76378c4ab704386ull},
    {"4x4", 700, 16, 520, 0x60a21fe244be51e4ull},
    {"4x4", 700, 100, 8, 0x0e653524e096e696ull},
    {"4x4", 700, 100, 130, 0x03236f73fa4d37eaull},
    {"4x4", 700, 100, 520, 0x54f22a823692cde6ull},
    {"4x4", 700, 300, 8, 0x29dcd4c74d2e068cull},
    {"4x4", 700, 300, 130, 0x53e895217eb81b68ull},
    {"4x4", 700, 300, 520, 0x3423ce34e1acba7aull},
    {"8x8", 1, 16, 8, 0xffce61b4a8c1e47dull},
    {"8x8", 1, 16, 130, 0xd87aa90e976a90cdull},
    {"8x8", 1, 16, 520, 0xc37688f770a6118eull},
    {"8x8", 1, 100, 8, 0xba254045b0c2fdfeull},
    {"8x8", 1, 100, 130, 0x7657111e9d74f17eull},
    {"8x8", 1, 100, 520, 0xb815fe0238bebe4full},
    {"8x8", 1, 300, 8, 0xab53539e3f9133a0ull},
    {"8x8", 1, 300, 130, 0x0c72d1d049ac6b25ull},
    {"8x8", 1, 300, 520, 0x3c6ec610c2809a7dull},
    {"8x8", 45, 16, 8, 0x9d45f74a08fd1d03ull},
    {"8x8", 45, 16, 130, 0x7964618758145d42ull},
    {"8x8", 45, 16, 520, 0x104ddd802a3f0f9eull},
    {"8x8", 45, 100, 8, 0x200384b06f04915cull},
    {"8x8", 45, 100, 130, 0x1e7f2ed06647b8c3ull},
    {"8x8", 45, 100, 520, 0x8287b530190e3368ull},
    {"8x8", 45, 300, 8, 0x9bcba9f2ae788684ull},
    {"8x8", 45, 300, 130, 0xa290bf8b6e7fe51aull},
    {"8x8", 45, 300, 520, 0x7273bdcf3a76eff3ull},
    {"8x8", 300, 16, 8, 0x48184068ea1fb856ull},
    {"8x8", 300, 16, 130, 0xc6f85898508108deull},
    {"8x8", 300, 16, 520, 0x8eb1204101d461cbull},
    {"8x8", 300, 100, 8, 0xdd6968a0ddf137caull},
    {"8x8", 300, 100, 130, 0x41b97f1d52453ae5ull},
    {"8x8", 300, 100, 520, 0x4acbd929a7705da2ull},
    {"8x8", 300, 300, 8, 0x2cbe1b31f8fc0331ull},
    {"8x8", 300, 300, 130, 0xb0b82786f1f7f864ull},
    {"8x8", 300, 300, 520, 0xf6763f4ffde08f07ull},
    {"8x8", 700, 16, 8, 0x530c2922a3aea86cull},
    {"8x8", 700, 16, 130, 0x9c560189b2d4108dull},
    {"8x8", 700, 16, 520, 0xfded046b72a7a331ull},
    {"8x8", 700, 100, 8, 0x5e72c4d88ccabc6aull},
    {"8x8", 700, 100, 130, 0xddbbdf29dcf7b4cfull},
    {"8x8", 700, 100, 520, 0xab5781c7b9bc0b47ull},
    {"8x8", 700, 300, 8, 0x0a46fcfe5bf30ed9ull},
    {"8x8", 700, 300, 130, 0x3ec97499d554a043ull},
    {"8x8", 700, 300, 520, 0xe2ab3d894e314723ull},
    {"16x16", 1, 16, 8, 0x165d270394ccaea7ull},
    {"16x16", 1, 16, 130, 0x51ec06cf1251adbbull},
    {"16x16", 1, 16, 520, 0xc6f1ad5142bf63a7ull},
    {"16x16", 1, 100, 8, 0x26460d8cd1ac78cdull},
    {"16x16", 1, 100, 130, 0x6f2ae683d4cb9ed2ull},
    {"16x16", 1, 100, 520, 0x425fa3940fb9e82cull},
    {"16x16", 1, 300, 8, 0x7c6d0d5821de680cull},
    {"16x16", 1, 300, 130, 0x8a027d5de86bc798ull},
    {"16x16", 1, 300, 520, 0x8367cf1c951a9529ull},
    {"16x16", 45, 16, 8, 0xaf0a727041aadbb7ull},
    {"16x16", 45, 16, 130, 0xfd776130fc993a6full},
    {"16x16", 45, 16, 520, 0xc86b90a23c36adcdull},
    {"16x16", 45, 100, 8, 0x06bf216b142ef6e1ull},
    {"16x16", 45, 100, 130, 0x6c69c8ed978eccb0ull},
    {"16x16", 45, 100, 520, 0x2ab09fb6c7f9e383ull},
    {"16x16", 45, 300, 8, 0xa37b037c8cce66c9ull},
    {"16x16", 45, 300, 130, 0xe60bdc34c9b3c464ull},
    {"16x16", 45, 300, 520, 0x6ec344bed0de9139ull},
    {"16x16", 300, 16, 8, 0x9b40c9c8c511bc2eull},
    {"16x16", 300, 16, 130, 0x0e1a3a675cd350b9ull},
    {"16x16", 300, 16, 520, 0x9950792365753d0aull},
    {"16x16", 300, 100, 8, 0x092215593e22a5d4ull},
    {"16x16", 300, 100, 130, 0xa0e3f9a2ebd9cabcull},
    {"16x16", 300, 100, 520, 0xedfa8b49b94dc76eull},
    {"16x16", 300, 300, 8, 0x0c7664d79d4e8dd8ull},
    {"16x16", 300, 300, 130, 0x1cba872763e1f92cull},
    {"16x16", 300, 300, 520, 0xc012c15ac486ecbfull},
    {"16x16", 700, 16, 8, 0x018f0609ca6138acull},
    {"16x16", 700, 16, 130, 0x73c7b48031a5127full},
    {"16x16", 700, 16, 520, 0x3ea42b7ca42fb4d2ull},
    {"16x16", 700, 100, 8, 0x06d7e18287090032ull},
    {"16x16", 700, 100, 130, 0x79f1cd2f43cb0aebull},
    {"16x16", 700, 100, 520, 0x09717ba3768e795cull},
    {"16x16", 700, 300, 8, 0x089f1fc9eb94896cull},
    {"16x16", 700, 300, 130, 0x748257aef22d3eafull},
    {"16x16", 700, 300, 520, 0xbf9224197e4835c5ull},
};

TEST(MatmulPlanSweep, CommandWordsAreThoseOfTheMonolithicPlanner) {
  if (std::getenv("TPU_PRINT_MATMUL_SWEEP")) {
    for (const char* v : {"4x4", "8x8", "16x16"})
      for (std::size_t m : kSweepM)
        for (std::size_t k : kSweepK)
          for (std::size_t n : kSweepN)
            std::printf("    {\"%s\", %zu, %zu, %zu, 0x%016llxull},\n", v, m, k, n,
                        static_cast<unsigned long long>(sweep_hash(v, m, k, n)));
    return;
  }
  ASSERT_EQ(kPinned.size(), 3 * kSweepM.size() * kSweepK.size() * kSweepN.size());
  for (const Pinned& p : kPinned)
    EXPECT_EQ(sweep_hash(p.variant, p.m, p.k, p.n), p.hash)
        << p.variant << " " << p.m << "x" << p.k << "x" << p.n;
}

}  // namespace
}  // namespace tpu
