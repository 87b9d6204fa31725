// Shared-memory segments are private to their owner: mode 0600 (memfd_create alone gives 0777).
#include "transport/shm/segment.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace chorus {
namespace {

TEST(SharedMemorySegment, IsReadableAndWritableByItsOwnerOnly) {
  const uint8_t job[16] = {1, 2, 3};
  auto segment = transport::shm::Segment::create(job, 0, 1, 4096);
  struct stat st {};
  ASSERT_EQ(::fstat(segment.fd(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

}  // namespace
}  // namespace chorus
