# Reduction kernels compiled per instruction set (reduce/dispatch.cc picks one at run time): the
# flags each *_avx2.cc / *_avx512.cc source of the given list needs.
function(chorus_set_kernel_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_avx512\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(src MATCHES "_avx2\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    endif()
  endforeach()
endfunction()
