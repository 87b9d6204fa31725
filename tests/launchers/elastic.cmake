# chorus-run --elastic with stand-in ranks that need no library (elastic_test.sh, about 10 s):
# restarts, the joiner announced in the store, a job that goes on without a rank or falls below
# --min-ranks, SIGKILL, the membership log, option errors.
add_test(NAME launchers.elastic_launcher
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/elastic_test.sh $<TARGET_FILE:chorus-run>)
set_tests_properties(launchers.elastic_launcher PROPERTIES LABELS launchers TIMEOUT 90)
