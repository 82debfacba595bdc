// The module braid_torch._C: what braid_torch/__init__.py calls (process_group.h).
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Braid's torch.distributed backend (import braid_torch, not this module)";
  m.def("unique_id", &braid_torch::newUniqueId,
        "A new Braid unique id in text form; the calling process serves its bootstrap");
  m.def("create", &braid_torch::createProcessGroup, pybind11::arg("unique_id"),
        pybind11::arg("rank"), pybind11::arg("world_size"), pybind11::arg("timeout_sec"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "The process group of rank in world_size ranks that share unique_id");
}
