// The registry of MXU variants compiled into this build (CMake defines TPU_HAVE_MXU_<R>X<C>).
#include <stdexcept>

#include "mxu_dut.h"
#include "mxu_dut_impl.h"
#include "tpu_contract.h"

#ifdef TPU_HAVE_MXU_4X4
#include "Vtpu_mxu_4x4.h"
#endif
#ifdef TPU_HAVE_MXU_8X8
#include "Vtpu_mxu_8x8.h"
#endif
#ifdef TPU_HAVE_MXU_16X16
#include "Vtpu_mxu_16x16.h"
#endif
#ifdef TPU_HAVE_MXU_128X128
#include "Vtpu_mxu_128x128.h"
#endif

namespace tpu {

namespace {
// Weight banks and weight rows per beat: the same in every variant (the contract's mxu_wbanks,
// mxu_wrows, configs/tpu_contract.yaml; the unit test of the contract checks they agree).
constexpr unsigned kWBanks = kChipVariants[0].mxu_wbanks, kWRows = kChipVariants[0].mxu_wrows;
// Every variant the RTL defines (the contract's variant table), built or not.
const std::vector<std::string> kAllVariants = [] {
  std::vector<std::string> v;
  for (const auto& k : kChipVariants) v.emplace_back(k.name);
  return v;
}();
}  // namespace

std::vector<std::string> built_mxu_variants() {
  std::vector<std::string> v;
#ifdef TPU_HAVE_MXU_4X4
  v.push_back("4x4");
#endif
#ifdef TPU_HAVE_MXU_8X8
  v.push_back("8x8");
#endif
#ifdef TPU_HAVE_MXU_16X16
  v.push_back("16x16");
#endif
#ifdef TPU_HAVE_MXU_128X128
  v.push_back("128x128");
#endif
  return v;
}

std::unique_ptr<MxuDut> make_mxu(const std::string& variant) {
#ifdef TPU_HAVE_MXU_4X4
  if (variant == "4x4")
    return std::make_unique<MxuDutImpl<Vtpu_mxu_4x4>>(variant, 4, 4, kWBanks, kWRows);
#endif
#ifdef TPU_HAVE_MXU_8X8
  if (variant == "8x8")
    return std::make_unique<MxuDutImpl<Vtpu_mxu_8x8>>(variant, 8, 8, kWBanks, kWRows);
#endif
#ifdef TPU_HAVE_MXU_16X16
  if (variant == "16x16")
    return std::make_unique<MxuDutImpl<Vtpu_mxu_16x16>>(variant, 16, 16, kWBanks, kWRows);
#endif
#ifdef TPU_HAVE_MXU_128X128
  if (variant == "128x128")
    return std::make_unique<MxuDutImpl<Vtpu_mxu_128x128, false>>(variant, 128, 128, kWBanks,
                                                                  kWRows);
#endif
  std::string built;
  for (const auto& b : built_mxu_variants()) built += (built.empty() ? "" : ", ") + b;
  for (const auto& known : kAllVariants) {
    if (known == variant) {
      throw std::invalid_argument(
          "chip variant '" + variant + "' was not built (built: " + built +
          "); reconfigure with -DTPU_BUILD_MXU128=ON and rebuild, e.g. "
          "cmake --preset default -DTPU_BUILD_MXU128=ON && cmake --build --preset default");
    }
  }
  std::string all;
  for (const auto& k : kAllVariants) all += (all.empty() ? "" : ", ") + k;
  throw std::invalid_argument("unknown chip variant '" + variant + "' (the RTL defines: " + all +
                              "; built: " + built + ")");
}

}  // namespace tpu
