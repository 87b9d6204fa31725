/* A program written for version 0.1 of the C API, with every name 0.2 deprecated: it must still
 * build (with deprecation warnings, silenced here) and run as before. argv[1]: a scratch
 * directory for the file stores and the trace dump. */
#include <chorus/chorus.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                             \
  do {                                                                          \
    chorus_status s_ = (call);                                                  \
    if (s_ != CHORUS_OK) {                                                      \
      fprintf(stderr, "old_names.c:%d: %s gave %s: %s\n", __LINE__, #call,      \
              chorus_status_string(s_), chorus_last_error(comm ? comm : NULL)); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "old_names.c:%d: expected %s\n", __LINE__, #cond); \
      return 1;                                                          \
    }                                                                    \
  } while (0)

int main(int argc, char** argv) {
  chorus_comm* comm = NULL;
  char url[4096];
  if (argc != 2) {
    fprintf(stderr, "usage: old_names SCRATCH_DIR\n");
    return 2;
  }
  snprintf(url, sizeof url, "file://%s/store-a", argv[1]);
  CHECK(chorus_init(url, 0, 1, &comm));
  EXPECT(chorus_rank(comm) == 0 && chorus_world_size(comm) == 1);

  float x[3] = {1.5f, -2.0f, 3.25f}, y[3] = {0, 0, 0};
  CHECK(chorus_allreduce(comm, x, y, 3, CHORUS_F32, CHORUS_SUM));
  EXPECT(memcmp(x, y, sizeof x) == 0);
  long long a[2] = {7, -9}, b[2] = {0, 0};
  chorus_request* req = NULL;
  CHECK(chorus_iallreduce(comm, a, b, 2, CHORUS_I64, CHORUS_MIN, &req));
  int done = 0;
  CHECK(chorus_test(req, &done));
  CHECK(chorus_wait(req));
  EXPECT(b[0] == 7 && b[1] == -9);

  chorus_call_options bf16 = {CHORUS_WIRE_BF16};
  CHECK(chorus_all_reduce_opts(comm, x, y, 3, CHORUS_F32, CHORUS_AVG, &bf16));
  EXPECT(y[0] == 1.5f && y[1] == -2.0f && y[2] == 3.25f); /* exact in bfloat16 */
  CHECK(chorus_iall_reduce_opts(comm, x, y, 3, CHORUS_F32, CHORUS_SUM, &bf16, &req));
  CHECK(chorus_wait(req));
  int dtypes[] = {CHORUS_F64, CHORUS_F16, CHORUS_BF16, CHORUS_I8, CHORUS_U8, CHORUS_I32};
  int ops[] = {CHORUS_PROD, CHORUS_MAX};
  EXPECT(dtypes[0] == CHORUS_DTYPE_F64 && dtypes[5] == CHORUS_DTYPE_I32);
  EXPECT(ops[0] == CHORUS_OP_PROD && ops[1] == CHORUS_OP_MAX);

  CHECK(chorus_dump_trace(comm, argv[1]));
  CHECK(chorus_abort(comm));
  EXPECT(chorus_allreduce(comm, x, y, 3, CHORUS_F32, CHORUS_SUM) == CHORUS_ERR_ABORTED);
  CHECK(chorus_destroy(comm));
  comm = NULL;

  chorus_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.timeout_ms = 5000;
  snprintf(url, sizeof url, "file://%s/store-b", argv[1]);
  CHECK(chorus_init_with_options(url, 0, 1, &o, &comm));
  CHECK(chorus_destroy(comm));
  comm = NULL;
  /* Started alone: a world of one. */
  CHECK(chorus_init_from_env(&comm));
  EXPECT(chorus_world_size(comm) == 1);
  CHECK(chorus_destroy(comm));
  comm = NULL;
  CHECK(chorus_init_from_env_with_options(&o, &comm));
  CHECK(chorus_destroy(comm));
  printf("version 0.1 names: every call behaves as its replacement\n");
  return 0;
}
