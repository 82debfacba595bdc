// What the training layer's parallel parts do with a failed Braid call: throw, naming the call,
// the result and the communicator's last error.
#pragma once

#include <stdexcept>
#include <string>

#include "braid/braid.h"

namespace braid::training {

inline void checkCall(braidResult_t r, braidComm_t comm, const std::string& what) {
  if (r != braidSuccess) {
    throw std::runtime_error(what + " failed: " + braidGetErrorString(r) + ": " +
                             braidGetLastError(comm));
  }
}

}  // namespace braid::training
