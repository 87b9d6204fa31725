// The small MLP with analytic gradients that the data-parallel tests train, and the helpers
// around it: deterministic samples, one optimizer step through a Replica, closeness checks.
#pragma once

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace chorus::testing {

constexpr size_t kIn = 9, kHidden = 21, kOut = 5;

// Teacher y = tanh(A x) on Gaussian inputs; sample g is the same wherever it is drawn.
inline void sample(int64_t g, float* x, float* y) {
  static const std::vector<float> a = [] {
    std::mt19937 rng(999);
    std::normal_distribution<float> n(0.0f, 0.6f);
    std::vector<float> v(kOut * kIn);
    for (float& e : v) e = n(rng);
    return v;
  }();
  std::mt19937 rng(static_cast<uint32_t>(g * 7919 + 13));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (size_t i = 0; i < kIn; ++i) x[i] = n(rng);
  for (size_t o = 0; o < kOut; ++o) {
    float s = 0;
    for (size_t i = 0; i < kIn; ++i) s += a[o * kIn + i] * x[i];
    y[o] = std::tanh(s);
  }
}

// x -> tanh(W1 x + b1) -> W2 h + b2, loss 0.5 |y' - y|^2 averaged over the batch. Tensors of
// 189, 21, 105 and 5 floats: with 512-byte buckets, {b2, w2} fuse, b1 and w1 go alone.
struct Mlp {
  std::vector<float> w1 = std::vector<float>(kHidden * kIn), b1 = std::vector<float>(kHidden),
                     w2 = std::vector<float>(kOut * kHidden), b2 = std::vector<float>(kOut);
  std::vector<float> gw1 = w1, gb1 = b1, gw2 = w2, gb2 = b2;

  explicit Mlp(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.3f);
    for (auto* t : values()) {
      for (float& e : *t) e = n(rng);
    }
  }
  std::vector<std::vector<float>*> values() { return {&w1, &b1, &w2, &b2}; }
  std::vector<std::vector<float>*> grads() { return {&gw1, &gb1, &gw2, &gb2}; }

  void registerWith(dp::Replica& r) {
    const char* names[] = {"w1", "b1", "w2", "b2"};
    for (size_t i = 0; i < 4; ++i) {
      r.addParameter(names[i], values()[i]->data(), grads()[i]->data(), values()[i]->size());
    }
    r.finalize();
  }
  // The same with the tensors' shapes (w1 21 x 9, w2 5 x 21): PowerSGD sees two matrices.
  void registerWithShapes(dp::Replica& r) {
    const char* names[] = {"w1", "b1", "w2", "b2"};
    const std::vector<size_t> shapes[] = {{kHidden, kIn}, {kHidden}, {kOut, kHidden}, {kOut}};
    for (size_t i = 0; i < 4; ++i) {
      r.addParameter(names[i], values()[i]->data(), grads()[i]->data(), shapes[i]);
    }
    r.finalize();
  }

  // Adds the gradient of the batch's mean loss to the grads; returns the mean loss.
  double backward(const std::vector<int64_t>& batch) {
    const float inv = 1.0f / static_cast<float>(batch.size());
    double loss = 0;
    for (int64_t g : batch) {
      float x[kIn], y[kOut], h[kHidden], e[kOut];
      sample(g, x, y);
      for (size_t j = 0; j < kHidden; ++j) {
        float s = b1[j];
        for (size_t i = 0; i < kIn; ++i) s += w1[j * kIn + i] * x[i];
        h[j] = std::tanh(s);
      }
      for (size_t o = 0; o < kOut; ++o) {
        float s = b2[o];
        for (size_t j = 0; j < kHidden; ++j) s += w2[o * kHidden + j] * h[j];
        e[o] = s - y[o];
        loss += 0.5 * e[o] * e[o] / static_cast<double>(batch.size());
      }
      for (size_t o = 0; o < kOut; ++o) {
        gb2[o] += e[o] * inv;
        for (size_t j = 0; j < kHidden; ++j) gw2[o * kHidden + j] += e[o] * inv * h[j];
      }
      for (size_t j = 0; j < kHidden; ++j) {
        float dh = 0;
        for (size_t o = 0; o < kOut; ++o) dh += w2[o * kHidden + j] * e[o] * inv;
        const float dpre = dh * (1 - h[j] * h[j]);
        gb1[j] += dpre;
        for (size_t i = 0; i < kIn; ++i) gw1[j * kIn + i] += dpre * x[i];
      }
    }
    return loss;
  }

  double evalLoss() {
    std::vector<int64_t> batch;
    for (int64_t j = 0; j < 64; ++j) batch.push_back(1000000 + j);
    Mlp copy = *this;
    return copy.backward(batch);
  }
  void sgd(float lr) {
    for (size_t t = 0; t < 4; ++t) {
      for (size_t i = 0; i < values()[t]->size(); ++i) (*values()[t])[i] -= lr * (*grads()[t])[i];
    }
  }
  void zeroGrad() {
    for (auto* g : grads()) std::fill(g->begin(), g->end(), 0.0f);
  }
  std::vector<float> flat() {
    std::vector<float> out;
    for (auto* t : values()) out.insert(out.end(), t->begin(), t->end());
    return out;
  }
};

inline std::vector<int64_t> range(int64_t first, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// One optimizer step of K micro-steps; batchOf(k) is micro-step k's batch on this rank.
// Gradients are reported in a random order when `order` is given, else as backward makes them.
inline double trainStep(dp::Replica& rep, Mlp& m, float lr, int k,
                        const std::function<std::vector<int64_t>(int)>& batchOf,
                        std::mt19937* order = nullptr) {
  double loss = 0;
  for (int micro = 0; micro < k; ++micro) {
    rep.beginStep();
    loss += m.backward(batchOf(micro)) / k;
    std::vector<size_t> ready = {3, 2, 1, 0};
    if (order) std::shuffle(ready.begin(), ready.end(), *order);
    for (size_t i : ready) rep.gradientReady(i);
    const bool apply = rep.waitGradients();
    if (apply != (micro == k - 1))
      throw std::runtime_error("waitGradients returned " + std::to_string(apply));
  }
  m.sgd(lr);
  rep.afterOptimizerStep();
  m.zeroGrad();
  return loss;
}

inline dp::Options smallBuckets() {
  dp::Options o;
  o.bucketBytes = 512;
  o.minBuckets = 0;  // the layouts below follow bucketBytes alone
  o.checkEvery = 1;
  o.log = [](const std::string&) {};
  return o;
}

inline void expectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 + 2e-5 * std::fabs(want[i])) << "element " << i;
  }
}

}  // namespace chorus::testing
