# chorus-run --elastic with stand-in ranks that need no library (elastic_test.sh, about 10 s):
# restarts, the joiner announced in the store, a job that goes on without a rank or falls below
# --min-ranks, SIGKILL, the membership log, option errors.
add_test(NAME launchers.elastic_launcher
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/elastic_test.sh $<TARGET_FILE:chorus-run>)
set_tests_properties(launchers.elastic_launcher PROPERTIES LABELS launchers TIMEOUT 90)

# examples/elastic_allreduce under chorus-run -n 4 --elastic with one rank killed: ends on 4 ranks
# with a restart, on 3 without (elastic_e2e_test.sh). Skips (77) while shrink is not built.
add_test(NAME launchers.elastic_allreduce
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/elastic_e2e_test.sh $<TARGET_FILE:chorus-run>
                 $<TARGET_FILE:elastic_allreduce>)
set_tests_properties(launchers.elastic_allreduce PROPERTIES LABELS launchers TIMEOUT 120
                     SKIP_RETURN_CODE 77)
