# Warnings for every Chorus target; CHORUS_WERROR (on in CI) makes them errors.
add_library(chorus_warnings INTERFACE)
target_compile_options(chorus_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wcast-align -Wunused -Wnull-dereference -Wimplicit-fallthrough
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Woverloaded-virtual>)
if(CHORUS_WERROR)
  target_compile_options(chorus_warnings INTERFACE -Werror)
endif()
if(CHORUS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
