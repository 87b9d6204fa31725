# cmake --install: headers, libchorus (shared + static), tools, CMake package and chorus.pc.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/chorus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS chorus chorus_static EXPORT ChorusTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ChorusTargets NAMESPACE Chorus:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/ChorusConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(OpenSSL COMPONENTS Crypto)
@CHORUS_FIND_CURL@
include("${CMAKE_CURRENT_LIST_DIR}/ChorusTargets.cmake")
]=])
# The static library links libcurl when it has the etcd store (src/CMakeLists.txt).
set(CHORUS_FIND_CURL "")
set(CHORUS_PC_CURL "")
if(CHORUS_HAVE_ETCD)
  set(CHORUS_FIND_CURL "find_dependency(CURL)")
  set(CHORUS_PC_CURL " -lcurl")
endif()
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/ChorusConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ChorusConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ChorusConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ChorusConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ChorusConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)

# Relocatable: the prefix is found relative to the .pc file, so `cmake --install --prefix X` works.
file(RELATIVE_PATH CHORUS_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/chorus.pc.in ${CMAKE_CURRENT_BINARY_DIR}/chorus.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/chorus.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
