// libFuzzer target for the BRAID_ALGO parser (tuning/cost_model.h parseAlgoSpec): any text
// must parse or be refused with braidInvalidArgument and a message, never crash or hang; a
// spec that parses must parse again from the same text to the same rules.
// Build: meson with clang (tests/fuzz/meson.build); run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tuning/cost_model.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRAID_DEBUG", "NONE", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  braid::tuning::AlgoSpec spec;
  const braidResult_t res = braid::tuning::parseAlgoSpec(text, &spec);
  if (res != braidSuccess && res != braidInvalidArgument) __builtin_trap();
  if (res == braidSuccess) {
    braid::tuning::AlgoSpec again;
    if (braid::tuning::parseAlgoSpec(text, &again) != braidSuccess ||
        again.rules.size() != spec.rules.size())
      __builtin_trap();
  }
  return 0;
}
