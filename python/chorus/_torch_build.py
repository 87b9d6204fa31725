"""Refuses a torch other than the one chorus._torch was built for, before it is loaded.

A C++ extension of torch works only with the torch release (and libstdc++ ABI) it was compiled
against: under another one it fails to load with an undefined symbol, or crashes. The build records
its torch in chorus/_build_info.py; releases compare without the local part ("+cu130", "+cpu"),
which names the accelerator build, not the C++ interface.
"""

import os
import sys

from chorus import _build_info


def _release(version):
    return str(version).split("+")[0]


def check(torch):
    """Raises ImportError unless `torch` is the torch this package was built for."""
    package = os.path.dirname(os.path.abspath(__file__))
    rebuild = (
        f"Rebuild chorus in this environment: {sys.executable} -m pip install --force-reinstall "
        f"--no-cache-dir <chorus source folder> (a CMake build: "
        f"-DPython3_EXECUTABLE={sys.executable})"
    )
    built = _build_info.torch_version
    if built is None:
        raise ImportError(
            f"chorus.torch: the chorus package in {package} was built without torch "
            f"(its build's python could not import torch). {rebuild}"
        )
    found = str(torch.__version__)
    found_abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    if _release(built) == _release(found) and found_abi == _build_info.torch_cxx11_abi:
        return
    abi = {True: "C++11 ABI", False: "pre-C++11 ABI"}
    raise ImportError(
        f"chorus.torch: the chorus package in {package} was built for torch {built} "
        f"({abi[_build_info.torch_cxx11_abi]}), but this Python imports torch {found} "
        f"({abi[found_abi]}) from {os.path.dirname(torch.__file__)}; a torch extension loads "
        f"only under the torch release it was built for. {rebuild}"
    )
