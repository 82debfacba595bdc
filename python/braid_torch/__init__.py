"""Braid as a torch.distributed backend (issue 33).

    import braid_torch  # registers the backend "braid"
    torch.distributed.init_process_group("braid", init_method="env://")  # or tcp://, file://

Importing this package registers "braid" with torch.distributed.Backend.register_backend.
Start-up needs nothing beyond what c10d already has: rank 0 of each group makes Braid's unique
id (braidGetUniqueId, whose bootstrap it then serves) and sets it in the group's c10d store;
the other ranks read it there, as ProcessGroupNCCL shares its id. The collectives run on CPU
tensors and complete inside the call (the Work returned is already complete), except inside
batch_isend_irecv, whose calls are one Braid group; see process_group.h for what each call
supports. Each group compares its ranks' calls before every collective (BRAID_CHECK), so
shapes or dtypes that differ raise on every rank; set BRAID_CHECK=0 to turn that off.
"""
import torch.distributed as _dist

from . import _C

__all__ = ["BACKEND", "create_process_group"]

BACKEND = "braid"
_UNIQUE_ID_KEY = "braid_unique_id"


def create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed calls for backend "braid": (store, rank, world_size,
    timeout) -> ProcessGroup. The store is the group's own (a PrefixStore), so each group
    gets its own key and its own communicator."""
    if rank == 0:
        unique_id = _C.unique_id()
        store.set(_UNIQUE_ID_KEY, unique_id)
    else:
        unique_id = store.get(_UNIQUE_ID_KEY).decode("ascii")
    return _C.create(unique_id, rank, world_size, timeout.total_seconds())


if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, create_process_group)
