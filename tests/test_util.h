// Shared helpers for multi-rank tests: exact inputs and closed-form expected values for
// every dtype x op, ranks as threads or as processes (re-executing this test binary).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::test {

constexpr braidDataType_t kHostTypes[] = {braidInt8,    braidUint8,   braidInt32,   braidUint32,
                                          braidInt64,   braidUint64,  braidFloat16, braidFloat32,
                                          braidFloat64, braidBfloat16};
constexpr braidRedOp_t kOps[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};

// Input of rank r at element i, as a double that the dtype holds exactly. Small values
// keep every partial sum and product exact in bf16 (and fp8), and int8 sums wrap.
double inputValue(braidDataType_t t, braidRedOp_t op, int r, size_t i);
// The all-reduce's exact expected element i over nranks, written into out (one element).
void expectedAllReduce(braidDataType_t t, braidRedOp_t op, int nranks, size_t i, void* out);
// Fills count elements for rank r.
void fillInput(braidDataType_t t, braidRedOp_t op, int r, size_t count, void* buf);
// Index of the first element of a that differs from b bitwise, or -1.
long long firstMismatch(const void* a, const void* b, size_t bytes, size_t elemSize);

// Runs fn(comm, rank) on every rank of an nranks communicator made by braidCommInitAll,
// one thread per rank; returns the ranks' failure messages (empty: all passed).
std::vector<std::string> runThreads(int nranks,
                                    const std::function<std::string(braidComm_t, int)>& fn);

// Runs this test binary again as nranks processes with --braid-child=ROLE, each joining
// one communicator; returns each child's exit status and output. The child's main must
// call childMain (see below).
struct ChildResult {
  int status;
  std::string output;
  int pid = 0;
};
std::vector<ChildResult> runProcesses(int nranks, const std::string& role,
                                      const std::vector<std::string>& extraEnv = {});

// In a test binary's main: if argv names a child role, runs it and returns its exit
// code; else returns -1. Roles are registered with registerChildRole.
int childMain(int argc, char** argv);
void registerChildRole(const std::string& role, std::function<int(braidComm_t, int, int)> fn);

// Braid segments in /dev/shm created by process `pid` ("braid-PID-..."); other jobs running
// at the same time do not count.
std::vector<std::string> shmLeftovers(int pid);
// The same for every child of a runProcesses call.
std::vector<std::string> shmLeftovers(const std::vector<ChildResult>& children);

}  // namespace braid::test
