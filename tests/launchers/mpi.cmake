# Open MPI's mpirun across 2 emulated hosts and MPICH's Hydra on one host (mpi_*_test.sh). Each
# skips (77, reason printed) without root, network namespaces or the launcher.

# Where each rank runs and how Chorus reaches its peers, printed by rank 0.
add_executable(mpi_placement_probe ${CMAKE_CURRENT_LIST_DIR}/mpi_placement_probe.cc)
target_link_libraries(mpi_placement_probe PRIVATE chorus chorus_warnings)

add_test(NAME launchers.mpirun_two_hosts
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/mpi_openmpi_test.sh $<TARGET_FILE:chorus-bench>
                 $<TARGET_FILE:mpi_placement_probe>)
add_test(NAME launchers.hydra_one_host
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/mpi_hydra_test.sh $<TARGET_FILE:chorus-bench>
                 $<TARGET_FILE:mpi_placement_probe>)
set_tests_properties(launchers.mpirun_two_hosts launchers.hydra_one_host PROPERTIES
                     LABELS launchers SKIP_RETURN_CODE 77 TIMEOUT 120)
