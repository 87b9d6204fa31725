"""Chorus: collective communication for data-parallel training.

``import chorus.torch`` registers the torch.distributed backend "chorus".

Without torch, the collectives work on any object with the buffer protocol (numpy arrays,
bytearray, memoryview), for programs that would use mpi4py::

    import numpy as np
    import chorus

    comm = chorus.Communicator.from_env()      # chorus-run -n 4 -- python3 prog.py
    chorus.launch_info()["local_rank"]         # from chorus-run, torchrun, mpirun or srun
    x = np.full(1024, comm.rank, dtype=np.float32)
    comm.all_reduce(x)                         # in place, op="sum"
    work = comm.all_reduce(x, op="max", async_op=True)
    work.wait()

``import chorus`` does not import torch.
"""

from chorus._build_info import version as __version__
from chorus._core import Communicator, Error, Options, ReduceOp, Work, launch_info

__all__ = ["Communicator", "Error", "Options", "ReduceOp", "Work", "launch_info"]

# The classes print as chorus.X rather than chorus._core.X.
for _cls in (Communicator, Error, Options, ReduceOp, Work):
    _cls.__module__ = __name__
del _cls
