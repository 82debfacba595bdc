// libFuzzer target for what ranks read from each other during init: the unique id (as text,
// braidUniqueIdFromString, and as its 128 bytes, decodeUniqueId), the peer cards exchanged
// by the bootstrap (PeerCard::decode) and the tuning figures and measured table that travel
// in rank 0's card (parseCalibration, MeasuredTable::decode). Any input must decode or be
// refused, never crash or hang.
// Build: meson with clang (tests/fuzz/meson.build); run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/bootstrap.h"
#include "core/comm.h"
#include "tuning/fabric.h"
#include "tuning/table.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRAID_DEBUG", "NONE", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  braidUniqueId id;
  if (braidUniqueIdFromString(text.c_str(), &id) == braidSuccess) {
    braid::UniqueIdData d;
    braid::decodeUniqueId(id, &d);
  }
  std::memset(id.internal, 0, sizeof(id.internal));
  std::memcpy(id.internal, data, size < sizeof(id.internal) ? size : sizeof(id.internal));
  braid::UniqueIdData d;
  braid::decodeUniqueId(id, &d);
  braid::PeerCard card;
  if (braid::PeerCard::decode(text, &card)) {
    braid::PeerCard again;
    if (!braid::PeerCard::decode(card.encode(), &again) || again.pid != card.pid ||
        again.shmName != card.shmName)
      __builtin_trap();  // an accepted card must survive its own encoding
  }
  braid::tuning::Fabric fabric;
  braid::tuning::parseCalibration(text, "fuzz.txt", &fabric);
  braid::tuning::MeasuredTable table;
  braid::tuning::MeasuredTable::decode(text, &table);
  return 0;
}
