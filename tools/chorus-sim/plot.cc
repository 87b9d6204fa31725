#include "plot.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace chorus::sim_tool {
namespace {

// matplotlib, fed the CSV on the command line: time against size, one line per algorithm.
const char* kPlotScript = R"PY(
import csv, sys, textwrap
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter
src, dst, title = sys.argv[1], sys.argv[2], sys.argv[3]
lines, chosen, skipped = {}, [], set()
with open(src) as f:
    for r in csv.DictReader(f):
        if r["status"] != "ok":
            skipped.add(r["algorithm"])
            continue
        b, t = int(r["bytes"]), float(r["seconds"])
        lines.setdefault(r["algorithm"], []).append((b, t))
        if r["auto"] == "1":
            chosen.append((b, t))
fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
marks = "osvD^<>pPX*hd"
for i, (name, pts) in enumerate(sorted(lines.items())):
    pts.sort()
    label = name + (" (some sizes not simulated)" if name in skipped else "")
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marks[i % len(marks)],
            markersize=3.5, linewidth=1.4, label=label)
for name in sorted(skipped - set(lines)):
    ax.plot([], [], linestyle="none", label=name + " (not simulated)")
if chosen:
    chosen.sort()
    ax.plot([p[0] for p in chosen], [p[1] for p in chosen], color="black", linewidth=2.5,
            alpha=0.35, zorder=0, label="auto (cost model)")
def size_label(b, _pos=None):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div:
            return "%g%s" % (b / div, unit)
    return "%g" % b if b >= 1 else ""
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.xaxis.set_major_formatter(FuncFormatter(size_label))
ax.set_xlabel("all-reduce size per rank (bytes)")
ax.set_ylabel("predicted time (s)")
ax.set_title("\n".join(textwrap.wrap(title, 110)), fontsize=9)
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(dst)
)PY";

}  // namespace

bool plot(const std::string& csvPath, const std::string& pngPath, const std::string& title) {
  const std::string script = pngPath + ".plot.py";
  {
    std::ofstream f(script);
    f << kPlotScript;
  }
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = "/usr/bin/python3 " + quote(script) + " " + quote(csvPath) + " " +
                          quote(pngPath) + " " + quote(title) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p != nullptr) {
    char buf[512];
    while (std::fgets(buf, sizeof(buf), p)) out += buf;
  }
  const int rc = p ? pclose(p) : -1;
  std::remove(script.c_str());
  if (rc != 0) {
    const bool noMatplotlib = out.find("No module named") != std::string::npos;
    std::fprintf(stderr, "chorus-sim: no PNG (%s)\n",
                 noMatplotlib ? "python3-matplotlib is not installed"
                              : ("/usr/bin/python3 failed: " + out.substr(0, 300)).c_str());
    return false;
  }
  return true;
}

}  // namespace chorus::sim_tool
