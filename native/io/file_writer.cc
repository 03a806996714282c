#include "file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace comlrl {

FileWriter::FileWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path_ + ": cannot create: " + std::strerror(errno));
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

bool FileWriter::WriteAll(const void* data, size_t size) {
  const auto* cursor = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, cursor, size);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return false;
    if (written == 0) {
      errno = ENOSPC;  // a regular file that accepts nothing more is full
      return false;
    }
    cursor += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

void FileWriter::Write(const void* data, size_t size) {
  if (!WriteAll(data, size)) Fail("write failed", errno);
}

size_t FileWriter::WriteOrRecord(const void* data, size_t size) noexcept {
  if (failed_errno_ == 0 && !WriteAll(data, size)) {
    failed_errno_ = errno;
    failed_what_ = "write failed";
  }
  return size;
}

void FileWriter::Finish() {
  if (failed_errno_ != 0) Fail(failed_what_, failed_errno_);
  if (::fsync(fd_) != 0) Fail("fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(path_.c_str());
    throw std::runtime_error(path_ + ": close failed: " + std::strerror(error));
  }
}

void FileWriter::Fail(const std::string& what, int error) {
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  throw std::runtime_error(path_ + ": " + what + ": " + std::strerror(error));
}

}  // namespace comlrl
