// Memory this process holds, for the tests that bound its growth over many calls or shrinks.
// Under AddressSanitizer the resident size counts the quarantine of freed blocks (256 MB by
// default), and under ThreadSanitizer its shadow memory and access histories, which grow with
// every access: growth is read from the sanitizer's allocator instead, the heap still allocated,
// which is what a leak would grow.
#pragma once

#include <malloc.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHORUS_TEST_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CHORUS_TEST_UNDER_SANITIZER 1
#endif
#endif

#if defined(CHORUS_TEST_UNDER_SANITIZER)
// From the sanitizer runtime (GCC does not install clang's sanitizer/allocator_interface.h).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace chorus::test {

// What memoryHeldBytes() measures, for messages.
inline const char* memoryHeldMeaning() {
#if defined(CHORUS_TEST_UNDER_SANITIZER)
  return "heap allocated (the sanitizer's allocator)";
#else
  return "resident";
#endif
}

inline long long memoryHeldBytes() {
#if defined(CHORUS_TEST_UNDER_SANITIZER)
  return static_cast<long long>(__sanitizer_get_current_allocated_bytes());
#else
  malloc_trim(0);  // freed memory counts as gone even where the allocator kept it
  long long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lld %lld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
#endif
}

}  // namespace chorus::test
