"""The build tree's package: chorus.__version__ is the project's, and chorus.torch refuses a torch
other than the one it was built for (its recorded version altered in a copy of the package) with
an ImportError that names both versions and how to rebuild, before it loads chorus._torch.

Usage: torch_build_check_test.py PACKAGE_PARENT PROJECT_VERSION   (ctest python.torch_build_check)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

parent, project_version = sys.argv[1], sys.argv[2]
env = dict(os.environ, PYTHONPATH=parent)
code = "import chorus, chorus._build_info as b; print(chorus.__version__, b.torch_version)"
version, torch_version = subprocess.run(
    [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
).stdout.split()
assert version == project_version, f"chorus.__version__ {version}, the project's {project_version}"
assert torch_version != "None", "the build tree's package records no torch"

with tempfile.TemporaryDirectory() as tmp:
    shutil.copytree(os.path.join(parent, "chorus"), os.path.join(tmp, "chorus"))
    info = os.path.join(tmp, "chorus", "_build_info.py")
    with open(info) as f:
        text = f.read()
    with open(info, "w") as f:
        f.write(re.sub(r'(?m)^torch_version = .*$', 'torch_version = "0.0.1"', text))
    run = subprocess.run(
        [sys.executable, "-c", "import chorus.torch"],
        env=dict(os.environ, PYTHONPATH=tmp), capture_output=True, text=True, timeout=120,
    )
    assert run.returncode != 0, "chorus.torch built for torch 0.0.1 imported under another torch"
    expected = (r"ImportError: chorus\.torch: the chorus package in .* was built for torch "
                r"0\.0\.1 \(C\+\+11 ABI\), but this Python imports torch .* "
                r"Rebuild chorus in this environment")
    assert re.search(expected, run.stderr), f"no clear refusal:\n{run.stderr}"
print("torch build check passed")
