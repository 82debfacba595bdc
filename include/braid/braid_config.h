/// @file braid_config.h
/// Braid extension: the settings Braid reads from the environment, each with its type, its
/// effective value and default as text, and the variable that value came from. One table
/// lists every variable Braid reads (src/base/settings.cc); NCCL 2.30's Param API in
/// libnccl.so.2 (ncclParamBind, ncclParamGetParameter, ncclParamDumpAll, ...) reports from it.
///
/// Values of the configuration Braid reads once a process (BRAID_DEBUG ... BRAID_BUFFSIZE) are
/// those in effect: as parsed ("1M" reads back "1048576"), and a refused value (warned about
/// on stderr) reads back as the default with source "default". The launch environment
/// (BRAID_RANK, BRAID_COMM_ID, ...) and BRAID_KERNEL_ISA are read where they are used: their
/// value is the variable's text as it is now (empty counts as unset). A secret's value
/// (BRAID_COMM_SECRET, BRAID_UNIQUE_ID) reads "(secret)" when it is set.
///
/// Usage:
/// @code
///   braidSetting_t s;
///   if (braidConfigGet("BRAID_BUFFSIZE", &s) == braidSuccess)
///     printf("%s=%s (%s)\n", s.name, s.value, s.source);  // BRAID_BUFFSIZE=1048576 (default)
/// @endcode
#ifndef BRAID_BRAID_CONFIG_H_
#define BRAID_BRAID_CONFIG_H_

#include "braid/braid.h"

#ifdef __cplusplus
extern "C" {
#endif

/// One setting. The strings belong to Braid (see each function for how long they stay valid).
typedef struct {
  const char* name;  ///< the variable Braid reads first: "BRAID_BUFFSIZE"
  /// How value reads: "int" (whole number), "size" (bytes, decimal), "double" (a real number,
  /// seconds for the timeouts), "bool" ("0" or "1"), "string", "enum" (one of the words the
  /// description lists; "" where empty means Braid's choice).
  const char* type;
  const char* ncclName;  ///< NCCL's variable of the same meaning, read where name is unset; ""
  const char* value;     ///< effective value: "1048576" for BRAID_BUFFSIZE=1M
  const char* defaultValue;
  /// Where value came from: the variable set ("BRAID_BUFFSIZE", "NCCL_BUFFSIZE"; for
  /// BRAID_CUDA_IPC also "NCCL_P2P_DISABLE"), or "default" when none was set or it was refused.
  const char* source;
  const char* description;  ///< one line: what it sets, units
} braidSetting_t;

/// Braid extension: the setting `name` names: its name ("BRAID_BUFFSIZE"), NCCL's name of the
/// same meaning ("NCCL_BUFFSIZE"), or its name without "BRAID_" ("BUFFSIZE"). *setting's
/// strings stay valid until the next braidConfigGet on the same thread.
/// braidInvalidArgument, naming the argument, when name or setting is NULL or name names no
/// setting (*setting untouched).
braidResult_t braidConfigGet(const char* name, braidSetting_t* setting);

/// Braid extension: every setting, in the table's order: *settings points to *count entries
/// that stay valid until the next braidConfigList on the same thread. braidInvalidArgument,
/// naming the argument, when settings or count is NULL.
braidResult_t braidConfigList(const braidSetting_t** settings, int* count);

/// Braid extension: reads BRAID_DEBUG and BRAID_DEBUG_SUBSYS (or NCCL_DEBUG and
/// NCCL_DEBUG_SUBSYS) from the environment again, so that logging follows a change made with
/// setenv after the first call read them (NCCL's ncclResetDebugInit). Other settings keep the
/// values they had. A value that does not parse leaves that setting as it was.
void braidResetDebugInit(void);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_CONFIG_H_ */
