// Golden collectives for a pod of chips on a ring / 2D / 3D torus or mesh (docs/collectives.md),
// in one include: the pod's shape and groups (tpu/topology.h), the logical mesh (tpu/mesh.h), the
// plan that says what moves where and in which order (tpu/collective_plan.h), rounds for buffers
// larger than on-chip memory (tpu/rounds.h) and the host executor that runs them bit-exactly
// (tpu/collective_exec.h). What a plan costs on the links is in the performance model
// (tpu/perf.h).
#pragma once

#include "tpu/collective_exec.h"
#include "tpu/collective_plan.h"
#include "tpu/mesh.h"
#include "tpu/rounds.h"
#include "tpu/topology.h"
