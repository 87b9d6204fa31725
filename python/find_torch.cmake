# chorus_find_python_torch(): the torch that Python3_EXECUTABLE imports. Sets, in the caller:
#   chorus_torch_version      torch.__version__ ("" when the interpreter cannot import torch)
#   chorus_torch_error        why not, in a line (the interpreter's last line of error)
#   chorus_torch_cxx11_abi    torch._C._GLIBCXX_USE_CXX11_ABI (0 or 1)
#   chorus_torch_lib_dir      torch/lib
#   chorus_torch_includes     torch's C++ include folders (a list)
#   chorus_torch_pybind11_abi the pybind11 ABI tags torch's module was built with (definitions)
# Under pip's build isolation the interpreter sees only the build requirements: pip names its own
# folder in PYTHONPATH and sets PYTHONNOUSERSITE. When torch cannot be imported as the environment
# stands, it is asked again without those two, so `pip install .` builds against the torch of the
# environment pip installs into, and no second torch is downloaded for the build.
function(chorus_find_python_torch)
  set(query [=[
import os, torch
root = os.path.dirname(torch.__file__)
try:
    from torch.utils.cpp_extension import include_paths
    includes = include_paths()
except ImportError:  # it imports setuptools, which a venv of Python 3.12 or later lacks
    includes = [os.path.join(root, "include"),
                os.path.join(root, "include", "torch", "csrc", "api", "include")]
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(os.path.join(root, "lib"))
print("|".join(includes))
print("|".join(f'PYBIND11_{k}="{getattr(torch._C, "_PYBIND11_" + k)}"'
               for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI") if hasattr(torch._C, "_PYBIND11_" + k)))
]=])
  foreach(env "" "--unset=PYTHONPATH;--unset=PYTHONNOUSERSITE")
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env ${env} ${Python3_EXECUTABLE} -c "${query}"
      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      break()
    endif()
  endforeach()
  if(NOT rc EQUAL 0)
    string(REGEX REPLACE "^.*\n" "" err "${err}")  # the exception's line
    set(chorus_torch_version "" PARENT_SCOPE)
    set(chorus_torch_error "${err}" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 version)
  list(GET out 1 cxx11_abi)
  list(GET out 2 lib_dir)
  list(GET out 3 includes)
  string(REPLACE "|" ";" includes "${includes}")
  set(pybind11_abi)
  list(LENGTH out lines)
  if(lines GREATER 4)
    list(GET out 4 pybind11_abi)
    string(REPLACE "|" ";" pybind11_abi "${pybind11_abi}")
  endif()
  set(chorus_torch_version "${version}" PARENT_SCOPE)
  set(chorus_torch_error "" PARENT_SCOPE)
  set(chorus_torch_cxx11_abi ${cxx11_abi} PARENT_SCOPE)
  set(chorus_torch_lib_dir "${lib_dir}" PARENT_SCOPE)
  set(chorus_torch_includes "${includes}" PARENT_SCOPE)
  set(chorus_torch_pybind11_abi "${pybind11_abi}" PARENT_SCOPE)
endfunction()
