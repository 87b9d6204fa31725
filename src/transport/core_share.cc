#include "transport/core_share.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace chorus::transport {
namespace {

std::string firstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string bootId() {
  std::string id = firstLine("/proc/sys/kernel/random/boot_id");
  id.erase(std::remove_if(id.begin(), id.end(),
                          [](char c) { return c == ' ' || c == '\n' || c == '/'; }),
           id.end());
  if (!id.empty()) return id;
  // No /proc: the host name is the best remaining guess at the machine.
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::string("host:") + name;
}

std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

uint64_t inodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The quota (cores) in one cgroup directory; 0 when it sets none.
double quotaIn(const std::string& dir, bool v2) {
  double quota = -1, period = 0;
  if (v2) {
    std::istringstream in(firstLine(dir + "/cpu.max"));  // "max 100000" or "50000 100000"
    std::string q;
    in >> q >> period;
    if (q.empty() || q == "max") return 0;
    quota = std::atof(q.c_str());
  } else {
    quota = std::atof(firstLine(dir + "/cpu.cfs_quota_us").c_str());  // -1: none
    period = std::atof(firstLine(dir + "/cpu.cfs_period_us").c_str());
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// The tightest CPU quota on the way from this process's cgroup to the root, and its cgroup.
void readQuota(CorePlacement& p) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1).
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string root;
    bool v2 = false;
    if (controllers.empty()) {
      root = "/sys/fs/cgroup";
      v2 = true;
      if (::access((root + "/cgroup.controllers").c_str(), F_OK) != 0) continue;  // v1 host
    } else {
      std::istringstream names(controllers);
      std::string name;
      bool cpu = false;
      while (std::getline(names, name, ',')) cpu = cpu || name == "cpu";
      if (!cpu) continue;
      root = "/sys/fs/cgroup/" + controllers;
      if (::access(root.c_str(), F_OK) != 0) root = "/sys/fs/cgroup/cpu";
    }
    for (;;) {
      const std::string dir = root + (path == "/" ? "" : path);
      if (double q = quotaIn(dir, v2); q > 0 && (p.quotaCores == 0 || q < p.quotaCores)) {
        p.quotaCores = q;
        p.cgroup = inodeOf(dir);
      }
      if (path.empty() || path == "/") break;
      path.resize(path.rfind('/') == 0 ? 1 : path.rfind('/'));
    }
  }
}

size_t unionSize(const std::vector<const CorePlacement*>& ranks, int machineCpus) {
  std::set<int> all;
  for (const CorePlacement* p : ranks) {
    if (p->cpus.empty()) return static_cast<size_t>(std::max(machineCpus, 1));
    all.insert(p->cpus.begin(), p->cpus.end());
  }
  return all.size();
}

bool overlap(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.empty() || b.empty()) return true;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

}  // namespace

CorePlacement thisPlacement() {
  CorePlacement p;
  p.machine = bootId();
  p.cpus = affinity();
  readQuota(p);
  return p;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parseCpuList(std::string_view text) {
  std::vector<int> cpus;
  auto number = [](std::string_view s, int& v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() && v >= 0 && v < 1 << 16;
  };
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view range = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    auto dash = range.find('-');
    int lo = 0, hi = 0;
    if (!number(range.substr(0, dash), lo)) return {};
    hi = lo;
    if (dash != std::string_view::npos && !number(range.substr(dash + 1), hi)) return {};
    if (hi < lo) return {};
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string encodePlacement(const CorePlacement& p) {
  char quota[32];
  std::snprintf(quota, sizeof(quota), "%.3f", p.quotaCores);
  return p.machine + "/cpus=" + formatCpuList(p.cpus) + "/cg=" + std::to_string(p.cgroup) +
         "/quota=" + quota;
}

CorePlacement decodePlacement(std::string_view word) {
  CorePlacement p;
  auto slash = word.find('/');
  p.machine = std::string(word.substr(0, slash));
  while (slash != std::string_view::npos) {
    word = word.substr(slash + 1);
    slash = word.find('/');
    std::string_view field = word.substr(0, slash);
    auto eq = field.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "cpus") p.cpus = parseCpuList(value);
    if (key == "cg") std::from_chars(value.data(), value.data() + value.size(), p.cgroup);
    if (key == "quota") {
      double q = std::atof(std::string(value).c_str());
      p.quotaCores = std::isfinite(q) && q > 0 ? q : 0;
    }
  }
  return p;
}

bool ranksOutnumberCores(const CorePlacement& self, const std::vector<CorePlacement>& peers,
                         int machineCpus) {
  std::vector<const CorePlacement*> group{&self};
  for (const CorePlacement& p : peers) {
    if (p.machine == self.machine && overlap(p.cpus, self.cpus)) group.push_back(&p);
  }
  double cores = static_cast<double>(unionSize(group, machineCpus));
  // What the quotas leave: a cgroup with a quota gives its ranks at most that many cores, the
  // ranks outside any quota all of their CPUs. A quota whose cgroup is unknown counts alone.
  std::vector<const CorePlacement*> free;
  std::map<uint64_t, std::vector<const CorePlacement*>> byCgroup;
  double capacity = 0;
  for (const CorePlacement* p : group) {
    if (p->quotaCores <= 0) {
      free.push_back(p);
    } else if (p->cgroup == 0) {
      capacity += std::min(p->quotaCores, static_cast<double>(unionSize({p}, machineCpus)));
    } else {
      byCgroup[p->cgroup].push_back(p);
    }
  }
  if (!free.empty()) capacity += static_cast<double>(unionSize(free, machineCpus));
  for (const auto& [cgroup, ranks] : byCgroup) {
    capacity +=
        std::min(ranks.front()->quotaCores, static_cast<double>(unionSize(ranks, machineCpus)));
  }
  cores = std::min(cores, capacity);
  return static_cast<double>(group.size()) > cores;
}

}  // namespace chorus::transport
