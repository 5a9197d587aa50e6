#include "train_images.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tpu {

std::vector<float> mlp_const_rows(const MlpSpec& spec) {
  const MlpConsts k = mlp_consts(spec);
  const std::size_t lanes = spec.lanes;
  std::vector<float> consts(kConstRows * lanes);
  for (std::size_t i = 0; i < lanes; ++i) {
    consts[kScaleRow * lanes + i] = k.grad_scale;
    consts[kNegLrRow * lanes + i] = k.neg_lr;
    consts[kBigRow * lanes + i] = k.mask_big;
    consts[kOneRow * lanes + i] = k.one;
  }
  return consts;
}

uint64_t put_images(HostPort& host, std::vector<HbmImage>& img, bool backdoor) {
  if (backdoor) {
    for (const HbmImage& i : img)
      host.backdoor_write(i.chip, i.addr, i.bytes.data(), i.bytes.size());
    return 0;
  }
  std::vector<HostCopy> ops;
  for (HbmImage& i : img)
    ops.push_back(HostCopy{i.chip, true, i.addr, i.bytes.data(), i.bytes.size()});
  return host.copy(ops);
}

void push_layer_images(const ChipDriver& d, int c, const HbmMatrix& w, const HbmMatrix& wb,
                       const HbmMatrix& at, const std::vector<float>& wb_rows, std::size_t in,
                       std::size_t rows, std::size_t batch, std::vector<HbmImage>& img) {
  std::vector<bf16_t> half(wb_rows.size());
  for (std::size_t i = 0; i < wb_rows.size(); ++i) half[i] = f32_to_bf16(wb_rows[i]);
  std::vector<bf16_t> ones(rows * batch, 0);
  std::fill(ones.begin() + static_cast<std::ptrdiff_t>(in * batch),
            ones.begin() + static_cast<std::ptrdiff_t>((in + 1) * batch), f32_to_bf16(1.0f));
  img.push_back(HbmImage{c, w.addr, d.matrix_image(w, wb_rows)});
  img.push_back(HbmImage{c, wb.addr, d.matrix_image(wb, half)});
  img.push_back(HbmImage{c, at.addr, d.matrix_image(at, ones)});
}

MlpLayer read_layer(HostPort& host, int chip, const HbmMatrix& w, std::size_t in,
                    std::size_t out) {
  std::vector<uint8_t> img(w.bytes());
  host.backdoor_read(chip, w.addr, img.data(), img.size());
  const std::vector<uint32_t> bits = ChipDriver::matrix_from_image(w, img);
  MlpLayer p;
  p.w.resize(in * out);
  p.b.resize(out);
  for (std::size_t i = 0; i < in * out; ++i) p.w[i] = f32_from_bits(bits[i]);
  for (std::size_t j = 0; j < out; ++j) p.b[j] = f32_from_bits(bits[in * out + j]);
  return p;
}

std::vector<std::vector<float>> loss_parts_of(const std::vector<std::vector<uint8_t>>& bursts,
                                              std::size_t lanes) {
  std::vector<std::vector<float>> parts;
  for (const auto& b : bursts) {
    std::vector<float> v(lanes);
    std::memcpy(v.data(), b.data(), lanes * 4);
    parts.push_back(v);
  }
  return parts;
}

TrainMesh train_mesh(const MachineInfo& mi, const Mesh& given) {
  const int P = mi.num_chips();
  TrainMesh tm;
  tm.data = P;
  if (given.axes.empty()) return tm;
  // Axes of size 1 split nothing: "data=4,model=1" is "data=4", "data=1,model=4" "model=4".
  const Mesh mesh = mesh_without_unit_axes(given);
  for (const MeshAxis& a : mesh.axes)
    if (a.name != "data" && a.name != "model")
      throw std::invalid_argument("train: mesh axis '" + a.name + "': the axes are 'data' and "
                                  "'model'");
  if (mesh.num_chips() != P)
    throw std::invalid_argument("train: the mesh " + mesh.text() + " has " +
                                std::to_string(mesh.num_chips()) + " chips, the pod " +
                                std::to_string(P));
  const bool has_model = mesh.text().find("model=") != std::string::npos;
  const bool has_data = mesh.text().find("data=") != std::string::npos;
  if (!has_model || mesh.axis_size("model") <= 1) return tm;
  tm.model_dims = mesh_axis_dims(mi.topo, mesh, "model");
  tm.model = mesh.axis_size("model");
  tm.data = P / tm.model;
  if (has_data) tm.data_dims = mesh_axis_dims(mi.topo, mesh, "data");
  for (int c = 0; c < P; ++c) {
    tm.model_rank.push_back(group_rank(mi.topo, tm.model_dims, c));
    tm.data_rank.push_back(has_data ? group_rank(mi.topo, tm.data_dims, c) : 0);
  }
  return tm;
}

CollectiveOp train_all_reduce(const Topology& topo, std::size_t n, const std::vector<int>& dims,
                              BufferRef in, BufferRef out, bool gradient, bool has_model_axis) {
  CollectiveOp co;
  co.spec.collective = Collective::kAllReduce;
  co.spec.dtype = DType::kF32;
  co.spec.n = n;
  co.spec.group_dims = dims;
  std::size_t active = 0;  // the group's dimensions with more than one chip
  for (int dim : topo.active_dims())
    active += dims.empty() || std::find(dims.begin(), dims.end(), dim) != dims.end();
  co.spec.algorithm = active >= 2 ? "torus" : "biring";
  co.in = in;
  co.out = out;
  co.axis = gradient ? (has_model_axis ? "data" : "") : "model";
  co.gradient = gradient;
  co.fit_algorithm = true;
  co.label_steps = false;  // the collectives run under their phase alone on the timeline
  return co;
}

}  // namespace tpu
