# Warnings for every Chorus target; CHORUS_WERROR (on in CI) makes them errors.
add_library(chorus_warnings INTERFACE)
target_compile_options(chorus_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wcast-align -Wunused -Wnull-dereference -Wimplicit-fallthrough
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Woverloaded-virtual>)
# GCC 12 at -O3 reports "accessing 9223372036854775810 or more bytes" for ordinary string
# concatenation ("[" + std::to_string(n)): a known false positive (GCC bug 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(chorus_warnings INTERFACE -Wno-restrict)
endif()
if(CHORUS_WERROR)
  target_compile_options(chorus_warnings INTERFACE -Werror)
endif()
if(CHORUS_SANITIZE AND CHORUS_TSAN)
  message(FATAL_ERROR "CHORUS_SANITIZE and CHORUS_TSAN exclude each other: build them apart")
endif()
if(CHORUS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(CHORUS_TSAN)
  # GCC warns that ThreadSanitizer does not model std::atomic_thread_fence (the flight recorder's
  # sequence locks use one): tests/sanitizers/README.md says how its reports there are read.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
  add_link_options(-fsanitize=thread)
endif()
