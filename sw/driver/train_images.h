// The host's side of a training step in HBM, shared by the data-parallel trainer
// (train_step.h) and the pipelined one (pipeline_train.h): images of chip memory written in one
// go (by copies the pod times, or by the backdoor), a layer's parameter images ([W; b] in f32
// and bf16, and A^T's rows with the row of ones that adds the bias), a layer read back from its
// f32 image, and the loss partials from the bursts the host read.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_driver.h"
#include "host_port.h"
#include "ops.h"
#include "tpu/mesh.h"
#include "tpu/train.h"

namespace tpu {

// The step's constant rows (MlpConsts) in its `consts` matrix, each row one value in every lane.
enum ConstRow : std::size_t {
  kScaleRow = 0,
  kNegLrRow = 1,
  kBigRow = 2,
  kOneRow = 3,
  kConstRows = 4
};

// The `consts` matrix of spec's step: kConstRows rows of spec.lanes f32.
std::vector<float> mlp_const_rows(const MlpSpec& spec);

// Bytes for one chip's HBM at addr.
struct HbmImage {
  int chip;
  uint64_t addr;
  std::vector<uint8_t> bytes;
};

// Writes every image: through the host port as copies (returns their cycles), or by the
// backdoor (0 cycles).
uint64_t put_images(HostPort& host, std::vector<HbmImage>& img, bool backdoor);

// A layer's three images on chip c, pushed onto img. wb_rows: [W; b] row-major, W's `in` rows
// then b in row `in`, then zeros to the matrices' rows (rows x out values); w gets it in f32,
// wb in bf16, and at gets `rows` rows of `batch` bf16 zeros but row `in`, all ones (A^T's rows,
// which the step overwrites, and the row that adds the bias).
void push_layer_images(const ChipDriver& d, int c, const HbmMatrix& w, const HbmMatrix& wb,
                       const HbmMatrix& at, const std::vector<float>& wb_rows, std::size_t in,
                       std::size_t rows, std::size_t batch, std::vector<HbmImage>& img);

// Layer (W: in x out, b: out) read back by the backdoor from its f32 [W; b] matrix w on chip.
MlpLayer read_layer(HostPort& host, int chip, const HbmMatrix& w, std::size_t in,
                    std::size_t out);

// A trainer's mesh of `data` and `model` axes over the pod (--mesh): the axes' torus dimensions
// and every chip's ranks. Without a model axis of more than one chip: data parallel over every
// chip (data = the chips, data_dims and the ranks empty: the pod, chip c is data rank c).
// std::invalid_argument naming the axis or the count and the rule.
struct TrainMesh {
  int data = 1, model = 1;
  std::vector<int> data_dims, model_dims;
  std::vector<int> data_rank, model_rank;
};
TrainMesh train_mesh(const MachineInfo& mi, const Mesh& given);

// A trainer's f32 all-reduce of n elements from `in` into `out` over the torus dimensions `dims`
// (empty: the pod): the torus algorithm over a group of two dimensions or more, else the
// bidirectional ring, or the slower ones after it that fit the collective's ICI counters
// (fit_algorithm); a gradient's over the data axis (named "data" when a model axis exists, else
// the pod), else over "model"; the collective under its phase alone on the timeline.
CollectiveOp train_all_reduce(const Topology& topo, std::size_t n, const std::vector<int>& dims,
                              BufferRef in, BufferRef out, bool gradient, bool has_model_axis);

// The loss partials: the first `lanes` f32 values of each burst.
std::vector<std::vector<float>> loss_parts_of(const std::vector<std::vector<uint8_t>>& bursts,
                                              std::size_t lanes);

}  // namespace tpu
