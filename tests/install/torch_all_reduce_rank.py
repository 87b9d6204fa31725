"""One rank of a 2-rank all_reduce through an installed chorus.torch (file:// rendezvous).

Usage: torch_all_reduce_rank.py PREFIX INIT_FILE RANK; checks that chorus and libchorus come from
PREFIX (not the build tree) and that the sum is right.
"""
import datetime
import sys

import chorus
import chorus.torch  # noqa: F401  registers the backend
import torch
import torch.distributed as dist

prefix, init_file, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
assert chorus.__file__.startswith(prefix), f"chorus imported from {chorus.__file__}"
dist.init_process_group("chorus", init_method="file://" + init_file, rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=30))
t = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
dist.all_reduce(t)
assert t.tolist() == [3.0, 30.0], f"rank {rank}: all_reduce gave {t.tolist()}"
with open("/proc/self/maps") as maps:
    libs = {line.split()[-1] for line in maps if "libchorus.so" in line}
assert libs and all(p.startswith(prefix) for p in libs), f"libchorus loaded from {libs}"
dist.destroy_process_group()
print(f"rank {rank} ok")
