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
#include <utility>

#include "../bridge/bridge.h"

namespace comlrl {

// Maps the whole file read-only: {mapping, size}. A file shorter than min_bytes is refused as truncated, shorter than
// `what` (the smallest header of its format).
inline std::pair<void*, size_t> MapReadOnly(const std::string& path, size_t min_bytes, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw ArgumentError(path + ": cannot open: " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw ArgumentError(path + ": cannot stat: " + reason);
  }
  const size_t size = static_cast<size_t>(info.st_size);
  if (size < min_bytes) {
    ::close(fd);
    throw ArgumentError(path + ": truncated: " + std::to_string(size) + " bytes, shorter than " + what);
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string reason = std::strerror(errno);
  ::close(fd);
  if (mapping == MAP_FAILED) throw ArgumentError(path + ": cannot map: " + reason);
  return {mapping, size};
}

// Drops the mapped pages under bytes [begin, end) of the mapping from this process's memory once they have been read
// (the kernel's page cache keeps them; a later read maps them again). Neighbouring bytes on the edge pages are
// dropped too, which costs at most a re-read: nothing in the mapping is written.
inline void ReleaseMappedPages(const void* mapping, size_t size, size_t begin, size_t end) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  const size_t first = begin / page * page;
  const size_t last = std::min(size, end);
  if (last > first) ::madvise(static_cast<uint8_t*>(const_cast<void*>(mapping)) + first, last - first, MADV_DONTNEED);
}

}  // namespace comlrl
