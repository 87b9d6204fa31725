#!/usr/bin/env python3
"""scripts/check-exports refuses what it is meant to refuse, on a small library built here: a
chorus.h function left unexported, an internal namespace or a private Impl exported, and a
public C++ function without CHORUS_API; and passes the same library once it is right.

  check_exports_test.py CXX   (the C++ compiler the project builds with)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(REPO, "scripts", "check-exports")
CXX = "c++"

HEADER_C = """\
#include <chorus/export.h>
#ifdef __cplusplus
extern "C" {
#endif
CHORUS_API int chorus_kept(void);
{old_mark} int chorus_old_name(void); /* a deprecated name: still exported */
#ifdef __cplusplus
}
#endif
"""
HEADER_CXX = """\
#pragma once
#include <chorus/export.h>
namespace chorus {
class CHORUS_API Widget {
 public:
  int size() const;
 private:
  struct CHORUS_HIDDEN Impl;
  Impl* impl_ = nullptr;
};
{unmarked} int widgetCount();
}  // namespace chorus
"""
SOURCE = """\
#include <chorus/chorus.h>
#include <chorus/widget.hpp>
namespace chorus {
struct Widget::Impl { {impl_visibility} int peek() const; };
int Widget::Impl::peek() const { return 1; }
int Widget::size() const { return impl_ ? impl_->peek() : 0; }
int widgetCount() { return 1; }
namespace transport {
{transport_visibility} int leak() { return 2; }
}  // namespace transport
}  // namespace chorus
extern "C" int chorus_kept(void) { return 0; }
extern "C" int chorus_old_name(void) { return 0; }
"""
DEFAULT = '__attribute__((visibility("default")))'


def build(root, **fill):
    inc = os.path.join(root, "include", "chorus")
    os.makedirs(inc, exist_ok=True)
    shutil.copy(os.path.join(REPO, "include", "chorus", "export.h"), inc)
    with open(os.path.join(inc, "chorus.h"), "w") as f:
        f.write(HEADER_C.replace("{old_mark}", fill["old_mark"]))
    with open(os.path.join(inc, "widget.hpp"), "w") as f:
        f.write(HEADER_CXX.replace("{unmarked}", fill["unmarked"]))
    src = os.path.join(root, "lib.cc")
    text = SOURCE
    for key in ("impl_visibility", "transport_visibility"):
        text = text.replace("{" + key + "}", fill[key])
    with open(src, "w") as f:
        f.write(textwrap.dedent(text))
    obj, so, a = (os.path.join(root, n) for n in ("lib.o", "libchorus.so", "libchorus.a"))
    flags = ["-std=c++20", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
             "-DCHORUS_BUILDING=1", "-I", os.path.join(root, "include")]
    subprocess.run([CXX, *flags, "-c", src, "-o", obj], check=True)
    subprocess.run([CXX, "-shared", obj, "-o", so], check=True)
    subprocess.run(["ar", "rcs", a, obj], check=True)
    p = subprocess.run([sys.executable, CHECK, so, "--static", a, "--include",
                        os.path.join(root, "include")], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


class CheckExports(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check-exports-")
        self.addCleanup(shutil.rmtree, self.root)

    def test_right_library_passes(self):
        rc, out = build(self.root, unmarked="CHORUS_API", old_mark="CHORUS_API",
                        impl_visibility="", transport_visibility="")
        self.assertEqual(rc, 0, out)
        self.assertIn("2 C functions of chorus.h", out)

    def test_each_mistake_is_named(self):
        rc, out = build(self.root, unmarked="", old_mark="", impl_visibility=DEFAULT,
                        transport_visibility=DEFAULT)
        self.assertEqual(rc, 1, out)
        self.assertIn("chorus_old_name (declared in include/chorus/chorus.h) is not exported", out)
        self.assertIn("exports chorus::transport::leak(): namespace chorus::transport is internal",
                      out)
        self.assertIn("exports chorus::Widget::Impl::peek() const: a private Impl is internal",
                      out)
        self.assertIn("does not export chorus::widgetCount(), which include/chorus declares", out)
        self.assertNotIn("chorus_kept", out.split("symbols:")[1])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        CXX = sys.argv.pop(1)
    unittest.main()
