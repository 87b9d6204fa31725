#include "data.h"

#include <zlib.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

namespace chorus::train {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

void readExact(gzFile f, void* out, size_t n, const std::string& path) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    int got = gzread(f, p, chunk);
    if (got <= 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw std::runtime_error(path + ": " + (got == 0 ? "unexpected end of file" : msg));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

uint32_t readBigEndian(gzFile f, const std::string& path) {
  unsigned char b[4];
  readExact(f, b, 4, path);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// Returns the items of an IDX file whose magic is `magic` and whose item shape is `itemDims`.
std::vector<uint8_t> readIdx(const std::string& path, uint32_t magic,
                             const std::vector<uint32_t>& itemDims, size_t limit, size_t* count) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(path + ": cannot open (install dataset-fashion-mnist?)");
  uint32_t m = readBigEndian(f.get(), path);
  if (m != magic) throw std::runtime_error(path + ": not an IDX file of the expected type");
  size_t n = readBigEndian(f.get(), path);
  size_t itemSize = 1;
  for (uint32_t d : itemDims) {
    if (readBigEndian(f.get(), path) != d) throw std::runtime_error(path + ": unexpected shape");
    itemSize *= d;
  }
  if (limit != 0) n = std::min(n, limit);
  std::vector<uint8_t> data(n * itemSize);
  readExact(f.get(), data.data(), data.size(), path);
  *count = n;
  return data;
}

}  // namespace

Dataset loadIdx(const std::string& dir, const std::string& prefix, size_t limit) {
  Dataset d;
  size_t nImages = 0, nLabels = 0;
  d.images =
      readIdx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 0x803, {28, 28}, limit, &nImages);
  d.labels = readIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 0x801, {}, limit, &nLabels);
  if (nImages != nLabels) {
    throw std::runtime_error(dir + ": " + prefix + " has " + std::to_string(nImages) +
                             " images but " + std::to_string(nLabels) + " labels");
  }
  for (uint8_t l : d.labels) {
    if (l > 9) throw std::runtime_error(dir + ": " + prefix + " has a label above 9");
  }
  d.count = nImages;
  return d;
}

std::vector<size_t> epochOrder(size_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (shuffle) {
    // std::shuffle's algorithm is implementation-defined, but every rank runs the same binary.
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

Batch batchAt(const std::vector<size_t>& order, size_t pos, int rank, int ranks, size_t batch) {
  const size_t n = order.size();
  const auto r = static_cast<size_t>(rank), w = static_cast<size_t>(ranks);
  Batch b;
  if (n == 0) return b;
  // Past the end (the last optimizer step of an epoch with accumulation): wrap around, as the
  // padding does.
  const size_t rows = pos < n ? std::min(batch, (n - pos + w - 1) / w) : batch;
  b.indices.reserve(rows);
  for (size_t j = 0; j < rows; ++j) b.indices.push_back(order[(pos + r + j * w) % n]);
  b.nextPos = pos + rows * w;
  return b;
}

std::vector<size_t> shardIndices(size_t n, int rank, int ranks, uint64_t seed, int epoch,
                                 bool shuffle) {
  const std::vector<size_t> order = epochOrder(n, seed, epoch, shuffle);
  size_t r = static_cast<size_t>(ranks);
  size_t total = (n + r - 1) / r * r;
  std::vector<size_t> mine;
  mine.reserve(total / r);
  for (size_t i = static_cast<size_t>(rank); i < total; i += r) mine.push_back(order[i % n]);
  return mine;
}

}  // namespace chorus::train
