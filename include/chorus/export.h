/* CHORUS_API marks what libchorus exports. The library is built with hidden visibility
 * (src/CMakeLists.txt), so the C functions, classes and functions of include/chorus that carry
 * this mark are its whole binary interface; everything else stays inside libchorus.so
 * (scripts/check-exports verifies both). */
#ifndef CHORUS_EXPORT_H_
#define CHORUS_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define CHORUS_API __attribute__((visibility("default")))
#else
#define CHORUS_API
#endif

/* CHORUS_HIDDEN marks the private implementation (Impl) of a CHORUS_API class, which would
 * otherwise take its enclosing class's visibility, so that Impl stays inside the library. Only
 * where the library's own sources are compiled (CHORUS_BUILDING, src/CMakeLists.txt): the tests
 * that see internals are compiled with default visibility, and there a struct holding an Impl
 * marked hidden would be a warning. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(CHORUS_BUILDING)
#define CHORUS_HIDDEN __attribute__((visibility("hidden")))
#else
#define CHORUS_HIDDEN
#endif

#endif /* CHORUS_EXPORT_H_ */
