#include "training/data.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

namespace braid::training {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// The whole (decompressed) file.
std::vector<uint8_t> readAll(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    throw std::runtime_error(
        path + ": " + std::strerror(errno) +
        " (Fashion-MNIST: apt-get install dataset-fashion-mnist, or --data DIR)");
  }
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f.get(), &err);
      throw std::runtime_error(path + ": corrupt gzip data: " + (msg ? msg : "unknown error"));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

uint32_t bigEndian32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

}  // namespace

ImageDataset readIdx(const std::string& images_path, const std::string& labels_path) {
  const std::vector<uint8_t> img = readAll(images_path);
  if (img.size() < 16 || bigEndian32(img, 0) != 0x00000803u) {
    throw std::runtime_error(images_path +
                             ": not an IDX image file (expected magic 0x00000803: ubyte, 3 "
                             "dimensions)");
  }
  const size_t count = bigEndian32(img, 4), rows = bigEndian32(img, 8), cols = bigEndian32(img, 12);
  if (img.size() != 16 + count * rows * cols) {
    throw std::runtime_error(images_path + ": truncated or oversized: header says " +
                             std::to_string(count) + " images of " + std::to_string(rows) + "x" +
                             std::to_string(cols) + " (" +
                             std::to_string(16 + count * rows * cols) + " bytes), the file holds " +
                             std::to_string(img.size()));
  }
  const std::vector<uint8_t> lab = readAll(labels_path);
  if (lab.size() < 8 || bigEndian32(lab, 0) != 0x00000801u) {
    throw std::runtime_error(labels_path +
                             ": not an IDX label file (expected magic 0x00000801: ubyte, 1 "
                             "dimension)");
  }
  const size_t nlabels = bigEndian32(lab, 4);
  if (lab.size() != 8 + nlabels) {
    throw std::runtime_error(labels_path + ": truncated or oversized: header says " +
                             std::to_string(nlabels) + " labels, the file holds " +
                             std::to_string(lab.size() - 8) + " bytes of them");
  }
  if (nlabels != count) {
    throw std::runtime_error(labels_path + ": " + std::to_string(nlabels) + " labels, but " +
                             images_path + " holds " + std::to_string(count) + " images");
  }
  ImageDataset d;
  d.count = count;
  d.features = rows * cols;
  d.pixels.assign(img.begin() + 16, img.end());
  for (size_t b = 0; b < d.value.size(); ++b) d.value[b] = static_cast<float>(b) / 255.0f;
  d.labels.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (lab[8 + i] > 9) {
      throw std::runtime_error(labels_path + ": label " + std::to_string(lab[8 + i]) +
                               " at index " + std::to_string(i) + " is not a class in [0, 9]");
    }
    d.labels[i] = lab[8 + i];
  }
  return d;
}

ImageDataset loadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  return readIdx(prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz");
}

void standardize(ImageDataset& data, float mean, float stddev) {
  const float inv = 1.0f / stddev;
  for (float& v : data.value) v = (v - mean) * inv;
}

std::vector<size_t> distributedIndices(size_t count, int rank, int nranks, uint64_t seed,
                                       uint64_t epoch, bool shuffle) {
  std::vector<size_t> perm(count);
  for (size_t i = 0; i < count; ++i) perm[i] = i;
  if (shuffle) {
    std::mt19937_64 rng(seed + epoch);
    for (size_t i = count; i > 1; --i) {
      const size_t j = static_cast<size_t>(rng() % i);
      std::swap(perm[i - 1], perm[j]);
    }
  }
  const size_t n = static_cast<size_t>(nranks);
  const size_t per_rank = (count + n - 1) / n;
  std::vector<size_t> out;
  out.reserve(per_rank);
  for (size_t k = 0; k < per_rank; ++k) {
    const size_t at = k * n + static_cast<size_t>(rank);
    if (count > 0) out.push_back(perm[at % count]);
  }
  return out;
}

void gatherBatch(const ImageDataset& data, const std::vector<size_t>& indices, size_t begin,
                 size_t end, Tensor& x, std::vector<int32_t>& labels) {
  const size_t rows = end - begin;
  x.resize({rows, data.features});
  labels.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = indices[begin + r];
    const uint8_t* in = data.pixels.data() + i * data.features;
    float* out = x.data() + r * data.features;
    for (size_t k = 0; k < data.features; ++k) out[k] = data.value[in[k]];
    labels[r] = data.labels[i];
  }
}

}  // namespace braid::training
