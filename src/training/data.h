// Datasets for the training layer: the IDX format of MNIST and Fashion-MNIST (gzip or plain),
// and per-rank sharding with seeded shuffling, as PyTorch's DistributedSampler does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "training/tensor.h"

namespace braid::training {

/// Images [count, rows * cols] and labels in [0, 9]. The pixels stay the file's bytes (a
/// quarter of the memory of fp32, as torchvision keeps them); a pixel's value is
/// `value[byte]`: byte / 255 as read, (byte / 255 - mean) / stddev after standardize.
/// gatherBatch converts the batch it copies.
struct ImageDataset {
  size_t count = 0;
  size_t features = 0;          ///< rows * cols (784 for 28x28)
  std::vector<uint8_t> pixels;  ///< [count, features], as in the file
  std::array<float, 256> value{};
  std::vector<int32_t> labels;
  /// Element i of the fp32 images [count, features].
  float image(size_t i) const { return value[pixels[i]]; }
};

/// Reads an IDX image file (magic 0x00000803: ubyte, 3 dimensions) and its IDX label file
/// (magic 0x00000801), gzip-compressed or not (zlib's gzread reads both).
/// @throws std::runtime_error naming the file: missing or unreadable, a bad magic number,
///         truncated data, or image and label counts that differ.
ImageDataset readIdx(const std::string& images_path, const std::string& labels_path);

/// Fashion-MNIST's split from `dir` (train-images-idx3-ubyte.gz, ...): `train` or the 10,000
/// test images (t10k-*). Same errors as readIdx.
ImageDataset loadFashionMnist(const std::string& dir, bool train);

/// x = (x - mean) / stddev for every pixel value (torchvision's Normalize); Fashion-MNIST's
/// training set has mean 0.2860 and standard deviation 0.3530.
void standardize(ImageDataset& data, float mean, float stddev);

/// The indices rank `rank` of `nranks` visits in `epoch`, DistributedSampler's rule: a
/// permutation of [0, count) (shuffled with seed + epoch, else identity) padded by repeating
/// its head to a multiple of nranks, of which the rank takes every nranks-th index starting
/// at `rank`. Each rank gets ceil(count / nranks) indices; every rank's shuffle is the same.
/// The permutation is a Fisher-Yates shuffle driven by std::mt19937_64 (not torch.randperm's).
std::vector<size_t> distributedIndices(size_t count, int rank, int nranks, uint64_t seed,
                                       uint64_t epoch, bool shuffle = true);

/// Copies the samples `indices[begin, end)` into x [end - begin, features] (their fp32
/// values) and labels.
void gatherBatch(const ImageDataset& data, const std::vector<size_t>& indices, size_t begin,
                 size_t end, Tensor& x, std::vector<int32_t>& labels);

}  // namespace braid::training
