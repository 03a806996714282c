// Read-only file mappings for the weight-file readers (safetensors, GGUF): every error names the file.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "../bridge/bridge.h"

namespace comlrl {

// A weight file's reader refusing it: the message names the file first.
[[noreturn]] inline void FailReading(const std::string& path, const std::string& message) { throw ArgumentError(path + ": " + message); }

// A whole file mapped read-only, unmapped with its owner: also when the owner's constructor throws after mapping it (a
// corrupt file leaves no mapping behind).
class MappedFile {
 public:
  // A file shorter than min_bytes is refused as truncated, shorter than `what` (the smallest header of its format).
  MappedFile(const std::string& path, size_t min_bytes, const std::string& what) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw ArgumentError(path + ": cannot open: " + std::strerror(errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw ArgumentError(path + ": cannot stat: " + reason);
    }
    size_ = static_cast<size_t>(info.st_size);
    if (size_ < min_bytes) {
      ::close(fd);
      throw ArgumentError(path + ": truncated: " + std::to_string(size_) + " bytes, shorter than " + what);
    }
    mapping_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const std::string reason = std::strerror(errno);
    ::close(fd);
    if (mapping_ == MAP_FAILED) throw ArgumentError(path + ": cannot map: " + reason);
  }
  ~MappedFile() { ::munmap(mapping_, size_); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* bytes() const { return static_cast<const uint8_t*>(mapping_); }
  size_t size() const { return size_; }

  // Drops the mapped pages under bytes [begin, end) of the file from this process's memory once they have been read
  // (the kernel's page cache keeps them; a later read maps them again). Neighbouring bytes on the edge pages are
  // dropped too, which costs at most a re-read: nothing in the mapping is written.
  void ReleasePages(size_t begin, size_t end) const {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    const size_t first = begin / page * page;
    const size_t last = std::min(size_, end);
    if (last > first) ::madvise(static_cast<uint8_t*>(mapping_) + first, last - first, MADV_DONTNEED);
  }

 private:
  void* mapping_ = nullptr;
  size_t size_ = 0;
};

}  // namespace comlrl
