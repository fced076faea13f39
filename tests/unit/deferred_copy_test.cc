// CopyDeferredData: a deferred tensor's bytes appended to another file by the kernel, as the save
// copies the weights a compile keeps in FP32 (compiler/external_data.cc).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/graph/deferred_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;
using ::testing::HasSubstr;

// A temporary file holding `bytes`, registered for deferred reads; returns its index.
int RegisterFile(const std::string& bytes, const std::string& path) {
  FILE* file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  EXPECT_EQ(std::fflush(file), 0);
  return AddDeferredFile(::dup(::fileno(file)), path);
}

TensorProto Deferred(int file, uint64_t offset, uint64_t length) {
  TensorProto tensor;
  tensor.set_name("w");
  tensor.set_data_type(TensorProto::FLOAT);
  tensor.add_dims(static_cast<int64_t>(length / 4));
  MakeDeferred(tensor, {file, offset, length});
  return tensor;
}

std::string FileBytes(int fd) {
  std::string bytes(static_cast<size_t>(::lseek(fd, 0, SEEK_END)), '\0');
  EXPECT_EQ(::pread(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  return bytes;
}

// 20 MiB from offset 4096: three kernel copies of at most 8 MiB, appended after what the output
// file held, at its position.
TEST(DeferredCopyTest, AppendsTheSpanAtTheOutputsPosition) {
  std::string source(4096 + (20 << 20) + 100, '\0');
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>((i * 131 + i / 7) % 251);
  const int file = RegisterFile(source, "model.onnx.data");
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  const std::string head = "already written";
  ASSERT_EQ(::write(::fileno(out), head.data(), head.size()), static_cast<ssize_t>(head.size()));
  uint64_t progress = 0;
  const uint64_t length = 20 << 20;
  absl::StatusOr<bool> copied = CopyDeferredData(Deferred(file, 4096, length), ::fileno(out),
                                                 [&](uint64_t bytes) { progress += bytes; });
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_TRUE(*copied) << "copy_file_range is available on Linux for regular files";
  EXPECT_EQ(progress, length);
  EXPECT_EQ(FileBytes(::fileno(out)), head + source.substr(4096, length));
  EXPECT_EQ(::lseek(::fileno(out), 0, SEEK_CUR), static_cast<off_t>(head.size() + length));
  std::fclose(out);
}

TEST(DeferredCopyTest, AFileShorterThanItsSpanIsAnErrorNamingIt) {
  const int file = RegisterFile(std::string(1000, 'x'), "short.onnx.data");
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  absl::StatusOr<bool> copied =
      CopyDeferredData(Deferred(file, 0, 4000), ::fileno(out), [](uint64_t) {});
  ASSERT_FALSE(copied.ok());
  EXPECT_THAT(copied.status().message(), HasSubstr("short.onnx.data: tensor 'w'"));
  EXPECT_THAT(copied.status().message(), HasSubstr("did it shrink?"));
  std::fclose(out);
}

TEST(DeferredCopyTest, DataInTheSinkIsNotCopied) {
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  absl::StatusOr<bool> copied =
      CopyDeferredData(Deferred(kSinkFile, 0, 16), ::fileno(out), [](uint64_t) {});
  EXPECT_FALSE(copied.ok());
  std::fclose(out);
}

}  // namespace
}  // namespace ampc
