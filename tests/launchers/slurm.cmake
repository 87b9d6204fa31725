# Slurm: a private one-node Slurm (scripts/slurm-local) runs chorus-bench under srun -n 2 and -n 4,
# chorus-train through sbatch --wait, and a job whose rank 1 is killed (slurm_test.sh). About 10 s;
# skipped (77) without root or without Slurm and munge. chorus-train is optional (LibTorch): its
# check is skipped when it is not built. Every step inside is bounded (about 4 min in all, under
# the TIMEOUT), so the script itself always gets to stop the daemons it started.
add_test(NAME launchers.slurm
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/slurm_test.sh $<TARGET_FILE:chorus-bench>
                 $<TARGET_FILE:mp_worker>
                 $<$<TARGET_EXISTS:chorus-train>:$<TARGET_FILE:chorus-train>>)
set_tests_properties(launchers.slurm PROPERTIES LABELS launchers SKIP_RETURN_CODE 77 TIMEOUT 300)
