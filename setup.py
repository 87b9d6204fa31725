"""`pip install .`: the Python package `chorus`, built by the project's CMake.

The extension modules (chorus._torch when torch is found, chorus._core when present) and
libchorus.so.N are built by CMake with the tests off and put inside the package; the modules find
the library beside them through their RUNPATH ($ORIGIN), so the package needs no installed Chorus.

Works offline with Debian's python3-setuptools and python3-wheel: there is deliberately no
pyproject.toml build-system table, whose build isolation would download setuptools and wheel.
Debian's pip refuses system installs (PEP 668); in a venv that sees Debian's torch:
    /usr/bin/python3 -m venv --system-site-packages v && v/bin/pip install .
Environment: CMAKE_BUILD_PARALLEL_LEVEL (build jobs), CHORUS_CMAKE_ARGS (extra configure
arguments, e.g. "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache").
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = Path(__file__).resolve().parent
# setuptools' default build folder is ./build, the project's CMake build folder: keep apart.
BUILD_BASE = "build-pip"


def project_version():
    text = (SOURCE / "CMakeLists.txt").read_text()
    match = re.search(r"project\(Chorus VERSION (\d+\.\d+\.\d+)", text)
    if not match:
        raise RuntimeError("setup.py: no 'project(Chorus VERSION x.y.z)' in CMakeLists.txt")
    return match.group(1)


class CMakeBuild(Extension):
    """Stands for every module the CMake build makes; CMake, not setuptools, compiles them."""

    def __init__(self):
        super().__init__("chorus._torch", sources=[])


class BuildWithCMake(build_ext):
    def build_extension(self, ext):
        build_dir = Path(self.build_temp).resolve() / "cmake"
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        package_dir.mkdir(parents=True, exist_ok=True)
        self._configure(build_dir)
        modules = self._python_module_targets(build_dir)
        if "chorus_py_torch" not in modules:
            raise RuntimeError(
                "setup.py: CMake did not find torch (libtorch-dev, python3-torch: "
                "scripts/install-deps), so chorus.torch cannot be built"
            )
        self._run(["cmake", "--build", str(build_dir), "--target", *sorted(modules)])
        for artifact in (a for paths in modules.values() for a in paths):
            shutil.copy2(build_dir / artifact, package_dir)
        for lib in self._libchorus_sonames(build_dir):
            shutil.copy(lib, package_dir / lib.name)  # the real file, under the name modules need

    def _configure(self, build_dir):
        # The CMake file API tells which Python modules this configuration builds.
        query = build_dir / ".cmake" / "api" / "v1" / "query" / "codemodel-v2"
        query.parent.mkdir(parents=True, exist_ok=True)
        query.touch()
        args = [
            "cmake", "-S", str(SOURCE), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCHORUS_BUILD_TESTS=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
            # Modules built with their install RUNPATH ($ORIGIN first) can move into the wheel.
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
        ]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("CHORUS_CMAKE_ARGS", ""))
        self._run(args)

    @staticmethod
    def _python_module_targets(build_dir):
        """{target: [artifact paths relative to build_dir]} of the chorus_py_* modules."""
        reply = build_dir / ".cmake" / "api" / "v1" / "reply"
        index = json.loads(max(reply.glob("index-*.json")).read_text())
        codemodel = json.loads((reply / index["reply"]["codemodel-v2"]["jsonFile"]).read_text())
        modules = {}
        for target in codemodel["configurations"][0]["targets"]:
            if not target["name"].startswith("chorus_py_"):
                continue
            detail = json.loads((reply / target["jsonFile"]).read_text())
            if detail["type"] == "MODULE_LIBRARY":
                modules[target["name"]] = [a["path"] for a in detail["artifacts"]]
        return modules

    @staticmethod
    def _libchorus_sonames(build_dir):
        libs = [p for p in (build_dir / "src").glob("libchorus.so.*")
                if re.fullmatch(r"libchorus\.so\.\d+", p.name)]
        if not libs:
            raise RuntimeError(f"setup.py: no libchorus.so.N in {build_dir / 'src'}")
        return libs

    @staticmethod
    def _run(args):
        print("setup.py:", " ".join(args), flush=True)
        subprocess.run(args, check=True)


os.makedirs(SOURCE / BUILD_BASE, exist_ok=True)
setup(
    name="chorus",
    version=project_version(),
    description="Chorus collective communication: the torch.distributed backend 'chorus'",
    packages=["chorus"],
    package_dir={"chorus": "python/chorus"},
    ext_modules=[CMakeBuild()],
    cmdclass={"build_ext": BuildWithCMake},
    python_requires=">=3.9",
    zip_safe=False,
    options={
        "build": {"build_base": BUILD_BASE},
        "egg_info": {"egg_base": BUILD_BASE},
    },
)
