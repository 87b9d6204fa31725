#!/usr/bin/env python3
"""scripts/check-layers and scripts/check-doc-links refuse what they are meant to refuse: run on
small trees made here, and on a copy of this repository with one include across the layers."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK_LAYERS = os.path.join(REPO, "scripts", "check-layers")
CHECK_LINKS = os.path.join(REPO, "scripts", "check-doc-links")

DESIGN = """\
# Design

<!-- layers: begin -->
| layer | files | may include |
|---|---|---|
| `low` | `src/low/` | `vocab` |
| `high` | `src/high/` | `low` (remark: `ignored`) `vocab` |
| `vocab` | `include/chorus/types.hpp` | |
<!-- layers: end -->

<!-- layer exceptions: begin -->
| file | includes | why |
|---|---|---|
{exceptions}
<!-- layer exceptions: end -->
"""


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))


def sources_only(folder, names):
    """copytree's ignore: C and C++ files and folders only (a checkout may hold results)."""
    return [n for n in names if not os.path.isdir(os.path.join(folder, n))
            and not n.endswith((".h", ".hpp", ".c", ".cc", ".cpp", ".inl"))]


def run(script, root):
    p = subprocess.run([sys.executable, script, "--root", root], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


class LayersOnSmallTree(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check-layers-")
        self.addCleanup(shutil.rmtree, self.root)
        write(self.root, "include/chorus/types.hpp", "#pragma once\n#include <cstdint>\n")
        write(self.root, "src/low/a.h", '#pragma once\n#include <chorus/types.hpp>\n')
        write(self.root, "src/high/b.cc", '#include "low/a.h"\n#include "high/b.h"\n')
        write(self.root, "src/high/b.h", "#pragma once\n")
        self.design("")

    def design(self, exceptions):
        write(self.root, "docs/design.md", DESIGN.format(exceptions=exceptions))

    def test_allowed_includes_pass(self):
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 0, out)

    def test_include_against_the_rules_names_file_line_and_rule(self):
        write(self.root, "src/low/a.h", '#pragma once\n#include <chorus/types.hpp>\n'
              '#include "high/b.h"\n')
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn('src/low/a.h:3: #include "high/b.h" (src/high/b.h, layer high) breaks '
                      "the rule of layer low, which may include vocab", out)

    def test_listed_exception_passes_and_a_stale_one_fails(self):
        write(self.root, "src/low/c.cc", '#include "high/b.h"\n')
        self.design("| `src/low/c.cc` | `src/high/b.h` | a reason |")
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 0, out)
        os.remove(os.path.join(self.root, "src/low/c.cc"))
        write(self.root, "src/low/c.cc", "int x;\n")
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("exception src/low/c.cc -> src/high/b.h matches no include", out)

    def test_file_in_no_layer_fails(self):
        write(self.root, "src/other/d.cc", "int y;\n")
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/other/d.cc: in no layer", out)

    def test_unresolved_quoted_include_fails(self):
        write(self.root, "src/high/e.cc", '#include "low/missing.h"\n')
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn('src/high/e.cc:1: #include "low/missing.h" names no file', out)

    def test_malformed_table_is_its_own_failure(self):
        write(self.root, "docs/design.md", "# Design\n\nno table\n")
        rc, out = run(CHECK_LAYERS, self.root)
        self.assertEqual(rc, 2, out)
        self.assertIn("markers", out)


class LayersOnThisRepository(unittest.TestCase):
    """The real table catches a new cross-layer include: common/ reaching up into core/."""

    def test_new_include_across_layers_fails(self):
        root = tempfile.mkdtemp(prefix="check-layers-repo-")
        self.addCleanup(shutil.rmtree, root)
        for top in ("src", "include", "tools", "python/ext", "trainer", "examples", "bench"):
            shutil.copytree(os.path.join(REPO, top), os.path.join(root, top),
                            ignore=sources_only)
        os.makedirs(os.path.join(root, "docs"))
        shutil.copy(os.path.join(REPO, "docs", "design.md"), os.path.join(root, "docs"))
        rc, out = run(CHECK_LAYERS, root)
        self.assertEqual(rc, 0, out)
        with open(os.path.join(root, "src/common/fd.h"), "a", encoding="utf-8") as f:
            f.write('#include "core/communicator_impl.h"\n')
        rc, out = run(CHECK_LAYERS, root)
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r'src/common/fd\.h:\d+: #include "core/communicator_impl\.h" '
                              r"\(src/core/communicator_impl\.h, layer core\) breaks the rule of "
                              r"layer common")


class DocLinks(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check-doc-links-")
        self.addCleanup(shutil.rmtree, self.root)
        write(self.root, "docs/a.md",
              "# A\n\n## Section one\n\nSee [b](b.md#x) and [top](../README.md).\n")
        write(self.root, "docs/b.md", "# B\n\n**Bold title.** Text.\n")
        write(self.root, "README.md", "[docs](docs/a.md), [web](https://example.org/docs/x.md)\n")
        write(self.root, "include/chorus/x.h",
              '// docs/a.md, "Section one"; docs/b.md ("Bold title"); docs/*.md\n')
        write(self.root, "src/core/kept.cc", "int k;\n")
        write(self.root, "src/core/kept.h", "#pragma once\n")
        write(self.root, "docs/design.md", "`kept.{h,cc}`, `core/kept.cc`\n")

    def test_resolving_pointers_pass(self):
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 0, out)

    def test_missing_docs_path_in_a_header_fails(self):
        write(self.root, "include/chorus/y.h", "// details: docs/api.md.\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("include/chorus/y.h:1: names docs/api.md, which does not exist", out)

    def test_missing_section_fails(self):
        write(self.root, "src/z.cc", '// docs/a.md, "Section two"\n')
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn('src/z.cc:1: docs/a.md has no section "Section two"', out)

    def test_broken_relative_markdown_link_fails(self):
        write(self.root, "docs/c.md", "text [gone](gone.md#part) `[code](skipped.md)`\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("docs/c.md:1: link gone.md#part leads nowhere (docs/gone.md)", out)
        self.assertNotIn("skipped.md", out)

    def test_map_of_the_code_naming_a_file_that_is_gone_fails(self):
        write(self.root, "docs/design.md", "`kept.{h,cc}`, `core/gone.cc`\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("docs/design.md:1: names core/gone.cc, which no file of the project is", out)

    def test_reader_of_a_variable_missing_from_config_page_fails(self):
        write(self.root, "tools/reader.cc", 'auto v = std::getenv("CHORUS_NEW_KNOB");\n')
        write(self.root, "docs/config.md", "# Configuration\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("tools/reader.cc: reads CHORUS_NEW_KNOB, but docs/config.md does not "
                      "name it", out)
        self.assertIn("tools/reader.cc: names CHORUS_NEW_KNOB, which docs/config.md does not",
                      out)
        write(self.root, "docs/config.md",
              "## Who reads what\n\n| `tools/reader.cc` | `CHORUS_NEW_KNOB` |\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 0, out)
        write(self.root, "tools/reader.cc", "int no_reads;\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("docs/config.md:3: lists tools/reader.cc as a reader of CHORUS_* "
                      "variables, but it reads none", out)

    def test_library_file_reading_a_variable_besides_the_one_reader_fails(self):
        config = ("## Who reads what\n\n| `src/common/options_env.cc` | `CHORUS_KNOB` |\n"
                  "| `src/trace/knob.cc` | `CHORUS_TRACE_KNOB` |\n")
        write(self.root, "docs/config.md", config)
        write(self.root, "src/common/options_env.cc", 'auto v = envVar("CHORUS_KNOB");\n')
        write(self.root, "src/trace/knob.cc", 'auto v = std::getenv("CHORUS_TRACE_KNOB");\n')
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/trace/knob.cc: reads CHORUS_TRACE_KNOB outside the library's readers "
                      "of CHORUS_* variables", out)
        self.assertNotIn("src/common/options_env.cc: reads", out)
        write(self.root, "src/trace/knob.cc", "int knob_from_options;\n")
        write(self.root, "docs/config.md", config.replace("| `src/trace/knob.cc` | "
                                                          "`CHORUS_TRACE_KNOB` |\n", ""))
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 0, out)

    def test_setting_a_variable_in_the_own_environment_fails(self):
        write(self.root, "tools/passer.cc", 'int main() {\n  setenv("CHORUS_X", "1", 1);\n}\n')
        write(self.root, "python/chorus/passer.py", 'import os\nos.environ["CHORUS_Y"] = "1"\n')
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("tools/passer.cc:2: sets an environment variable in its own process", out)
        self.assertIn("python/chorus/passer.py:2: sets an environment variable", out)
        write(self.root, "python/chorus/passer.py", 'import os\nok = os.environ["CHORUS_Y"] == "1"\n')
        write(self.root, "tools/passer.cc", "int main() {}\n")
        rc, out = run(CHECK_LINKS, self.root)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
