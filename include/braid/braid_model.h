/// @file braid_model.h
/// Braid extensions that describe a machine without running ranks on it: read a topology (this
/// machine's, or one saved from another: NCCL or hwloc XML, tool output, a saved /sys), print it,
/// and predict each algorithm's time for a call on a job built from that topology replicated
/// over hosts, by the same cost model and schedule simulator that pick algorithms at run time
/// (braidCommPredict answers the same question for a live communicator). braid-topo and
/// braid-sim are thin programs over these calls.
///
/// Every function returns a braidResult_t; on failure braidGetLastError(NULL) says why, naming
/// the file or argument at fault. Objects are not thread-safe: one thread at a time per object.
#ifndef BRAID_BRAID_MODEL_H_
#define BRAID_BRAID_MODEL_H_

#include "braid/braid.h"

#ifdef __cplusplus
extern "C" {
#endif

/// A machine's topology: CPUs and NUMA nodes, the PCI tree, GPUs and their NVLinks, NICs.
typedef struct braidTopology* braidTopology_t;

/// Reads a topology into *topo. With file and fsroot both NULL (or ""), detects this machine
/// (hwloc, NVML, libibverbs and sysfs, each where present). `file`: any form braid-topo --file
/// names (NCCL topology or graph XML, hwloc XML or an fsroot tarball, nvidia-smi topo / nvlink
/// output, ibstat / ibstatus, lspci, lstopo -v text, a /sys/class/infiniband copy), the format
/// found from its content. `fsroot`: a directory holding a copy of /sys and /proc, read as this
/// machine's would be (NVML and libibverbs, which see only this machine, are not used).
/// @return braidInvalidArgument for a NULL topo, both file and fsroot given, or a file that is
///         no topology (the message names the file and the line at fault); braidSystemError
///         when the file or root cannot be read.
braidResult_t braidTopologyLoad(braidTopology_t* topo, const char* file, const char* fsroot);

/// Forms of braidTopologyPrint.
typedef enum BRAID_ENUM_INT {
  braidTopologyText = 0,    ///< braid-topo's tree, path matrix, rings and trees
  braidTopologyJson = 1,    ///< one JSON object (numa_nodes, gpus, nics, paths, rings, ...)
  braidTopologyNcclXml = 2  ///< NCCL topology XML (NCCL_TOPO_FILE's format)
} braidTopologyFormat_t;

/// Writes topo in `format` to *text: a NUL-terminated string owned by topo, valid until the
/// next braidTopologyPrint on it or braidTopologyDestroy.
/// @return braidInvalidArgument for NULL arguments, an unknown format, or NCCL XML of a
///         topology read from an NCCL graph file (it gives no PCI placement).
braidResult_t braidTopologyPrint(braidTopology_t topo, braidTopologyFormat_t format,
                                 const char** text);

/// Frees topo (NULL is a no-op). Models made from it stay valid.
braidResult_t braidTopologyDestroy(braidTopology_t topo);

/// A job on a topology replicated over hosts: its ranks, their links and costs.
typedef struct braidModel* braidModel_t;

/// How braidModelCreate builds the job. Zero in a field means the default it names.
typedef struct {
  int hosts;          ///< hosts joined by their NICs (>= 1; 0 is 1)
  int ranksPerHost;   ///< ranks per host; 0: one per GPU, or one per core without GPUs
  double nicGbps;     ///< speed in Gb/s of NIC ports the file gives none for; 0: 100
  int nvswitchLinks;  ///< NVLinks of each GPU to an NVSwitch where the file shows none; 0: none
  int mnnvl;          ///< nonzero: hosts joined by NVLink (multi-node NVLink), not NICs
  const char* calibration;  ///< link figures measured by braid-tune --calibrate, or NULL
  int nvlsDisable;          ///< nonzero: no NVLink SHARP (NCCL_NVLS_ENABLE=0)
  int nvlsChannels;         ///< NVLS channels (NCCL_NVLS_NCHANNELS); 0: 16
  int mnnvlDomainHosts;     ///< with mnnvl: hosts per NVLink domain (an NVL72 rack: 18); 0: all
} braidModelConfig;

/// Builds *model from topo and config (config NULL: all defaults).
/// @return braidInvalidArgument for a NULL model or topo, a negative field, more than 2^24
///         hosts that cannot be joined (no NIC with a speed; mnnvl without GPUs), or a
///         calibration file that is not braid-tune's (the message says which and why);
///         braidInvalidUsage for a job of more than 2^24 ranks.
braidResult_t braidModelCreate(braidModel_t* model, braidTopology_t topo,
                               const braidModelConfig* config);

/// What a model is.
typedef struct {
  int nranks;          ///< hosts x ranks per host
  int simulates;       ///< nonzero: the selector plays schedules (few enough ranks)
  const char* fabric;  ///< one line: ranks, hosts, links and their costs
  const char* notes;   ///< how each figure was found, a line each ('\n'-separated)
} braidModelInfo;

/// Fills *info; its strings are owned by model and live as long as it.
braidResult_t braidModelGetInfo(braidModel_t model, braidModelInfo* info);

/// One algorithm's prediction for a call.
typedef struct {
  const char* algorithm;  ///< its name in the table (a static string)
  int supported;          ///< zero: the algorithm cannot run this call (times are 0)
  double predictedUs;     ///< the selector's time in microseconds (may be +inf)
  double simulatedUs;     ///< the schedules played by the simulator, or -1 (not asked, or
                          ///< too many ranks or steps to play)
  int deviceOnly;         ///< nonzero: an NCCL GPU-kernel algorithm (nvls, nvlstree, pat) that
                          ///< Braid's executor does not run, priced from its device schedule
} braidModelEstimate;

/// What one call costs on model: `collective` as braidListAlgorithms names it (not alltoallv
/// or barrier), `count` its count argument in elements of dtype. Fills estimates[0..max) with
/// the collective's algorithms in table order and sets *nestimates to their number; *chosen
/// to the index of the selector's pick (-1: none can run it), *pieceBytes to the pick's
/// pipelining grain (0: none), *callBytes to the bytes nccl-tests' size column gives for the
/// call and *busBwFactor to nccl-tests' busbw / algbw for it. `simulate` nonzero also plays
/// each algorithm's schedules (simulatedUs). Output pointers other than estimates may be NULL.
/// *chosen indexes the whole list: it may be >= max when max is smaller than *nestimates.
/// @return braidInvalidArgument for a NULL model or nestimates, an unknown collective or
///         dtype, count 0, or a call of more than 2^48 bytes (count x element x ranks).
braidResult_t braidModelPredict(braidModel_t model, const char* collective, size_t count,
                                braidDataType_t dtype, int simulate, braidModelEstimate* estimates,
                                int max, int* nestimates, int* chosen, size_t* pieceBytes,
                                size_t* callBytes, double* busBwFactor);

/// Where one algorithm's time for a call goes, microseconds: the busiest rank's time on its
/// NVLink (or other intra-host link), on its share of the NICs, reducing; latency is the rest
/// of the total (latencies, pipeline fill, waits); total is braidModelPredict's predictedUs.
typedef struct {
  double nvlinkUs, networkUs, reduceUs, latencyUs, totalUs;
} braidModelTimeSplit;

/// Fills *split for `algorithm` (a name braidModelPredict lists for the collective) running the
/// call (arguments as braidModelPredict's).
/// @return braidInvalidArgument for NULL arguments, an unknown collective, dtype or algorithm,
///         count 0, or an algorithm that cannot run the call (the message says why).
braidResult_t braidModelExplain(braidModel_t model, const char* collective, size_t count,
                                braidDataType_t dtype, const char* algorithm,
                                braidModelTimeSplit* split);

/// Frees model (NULL is a no-op).
braidResult_t braidModelDestroy(braidModel_t model);

/// A byte size as Braid's settings and tools read them: decimal digits, then nothing or B, or a
/// 1024-based K, M, G or T (k, KB, KiB and the like too): "8", "64K", "256MiB".
/// @return braidInvalidArgument for NULL arguments, any other text, or a size over SIZE_MAX.
braidResult_t braidParseSize(const char* text, size_t* bytes);

#ifdef __cplusplus
}
#endif

#endif  // BRAID_BRAID_MODEL_H_
