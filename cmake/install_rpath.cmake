# Installed programs find libchorus next to them: RUNPATH $ORIGIN/<bindir to libdir>, relative so
# that `cmake --install --prefix P` works for any P without LD_LIBRARY_PATH. Include it after the
# library and before the programs: targets take CMAKE_INSTALL_RPATH when they are created.
file(RELATIVE_PATH chorus_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(CMAKE_INSTALL_RPATH "$ORIGIN/${chorus_bin_to_lib}")
