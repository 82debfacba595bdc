// The peer cards of init's exchange, and the machine and host identities they carry.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/config.h"
#include "core/comm.h"

namespace braid {

std::string PeerCard::encode() const {
  return hostId + "\n" + machineId + "\n" + std::to_string(pid) + "\n" + shmName + "\n" +
         std::to_string(chunkSize) + "\n" + (chunkSizeSet ? "1" : "0") + "\n" + transport + "\n" +
         std::to_string(nsocks) + "\n" + std::to_string(numa) + "\n" + tune + "\n" + table + "\n" +
         ring + "\n" + std::to_string(shmAddr) + "\n" +
         std::to_string((check ? 1 : 0) | (fingerprints ? 0 : 2)) + "\n" +
         std::to_string(procToken) + "\n" + stallAddr + "\n" + std::to_string(memProbe) + "\n" +
         (cudaIpc ? "1" : "0") + "\n" + busId + "\n" + algo + "\n" + ctrlAddr + "\n" +
         settingsError + "\n";
}

bool PeerCard::decode(const std::string& text, PeerCard* out) {
  std::istringstream in(text);
  std::string pid, chunk, chunkSet, nsocks, numa, shmAddr, check, token, probe, ipc;
  if (!std::getline(in, out->hostId) || !std::getline(in, out->machineId) ||
      !std::getline(in, pid) || !std::getline(in, out->shmName) || !std::getline(in, chunk) ||
      !std::getline(in, chunkSet) || !std::getline(in, out->transport) ||
      !std::getline(in, nsocks) || !std::getline(in, numa) || !std::getline(in, out->tune) ||
      !std::getline(in, out->table) || !std::getline(in, out->ring) || !std::getline(in, shmAddr) ||
      !std::getline(in, check) || !std::getline(in, token) || !std::getline(in, out->stallAddr) ||
      !std::getline(in, probe) || !std::getline(in, ipc) || !std::getline(in, out->busId) ||
      !std::getline(in, out->algo) || !std::getline(in, out->ctrlAddr) ||
      !std::getline(in, out->settingsError))
    return false;
  out->cudaIpc = ipc == "1";
  out->memProbe = std::atoi(probe.c_str());
  out->procToken = std::strtoull(token.c_str(), nullptr, 10);
  // Bit 0: BRAID_CHECK; bit 1: BRAID_CALL_CHECK=0 (so a card without it reads as the default).
  const int checks = std::atoi(check.c_str());
  out->check = (checks & 1) != 0;
  out->fingerprints = (checks & 2) == 0;
  out->shmAddr = std::strtoull(shmAddr.c_str(), nullptr, 10);
  out->numa = std::atoi(numa.c_str());
  out->nsocks = std::atoi(nsocks.c_str());
  out->chunkSizeSet = chunkSet == "1";
  out->pid = std::atoi(pid.c_str());
  out->chunkSize = std::strtoull(chunk.c_str(), nullptr, 10);
  return true;
}

std::string localMachineId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

std::string localHostId() {
  if (!config().hostId.empty()) return config().hostId;
  return localMachineId();
}

}  // namespace braid
