// The text form of a named mesh, "data=16,model=4" (docs/collectives.md, "Mesh axes and
// rounds"), read into the typed tpu::Mesh of model/ (tpu/mesh.h): what --mesh and the config's
// mesh: key give. Below the configuration module meshes are typed, never text.
#pragma once

#include <string>
#include <vector>

#include "tpu/mesh.h"

namespace tpu {

// Parses "x=4,y=4" / "data=16,model=4" (spaces around names and sizes allowed). Throws
// std::invalid_argument naming the text and the rule: empty text, an item that is not
// name=size, an empty name, a name not of letters, digits and '_', a duplicate name, a size that
// is not an integer, a size < 1.
Mesh parse_mesh(const std::string& text);

// A training job's --mesh: parsed, every axis one of `axes`, the axes multiplying to the pod's
// chips and lining up with its dimensions (check_mesh). Throws std::invalid_argument
// "--mesh TEXT: " and the rule.
Mesh parse_train_mesh(const std::string& text, const Topology& topo,
                      const std::vector<std::string>& axes);

}  // namespace tpu
