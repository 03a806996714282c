// The one way native code writes a file: every failure (open, a short write, disk full, fsync, close) is an error
// naming the file with the system's reason, and a file that was not finished is removed, never left half-written.
#pragma once

#include <cstddef>
#include <string>

namespace comlrl {

class FileWriter {
 public:
  // Creates or truncates path.
  explicit FileWriter(std::string path);
  // An unfinished file is closed and removed.
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Writes all of data or throws (after removing the file).
  void Write(const void* data, size_t size);
  // For callbacks inside libraries that must not see an exception (torch's zip writer throws from its destructor
  // when its sink fails): records the first failure, skips later writes and always reports size written. Finish()
  // raises what was recorded.
  size_t WriteOrRecord(const void* data, size_t size) noexcept;
  // Makes the file durable (fsync) and closes it; throws, removing the file, on a recorded or new failure.
  void Finish();

  const std::string& path() const { return path_; }

 private:
  // Closes and removes the file, then throws "<path>: <what>: <strerror(error)>".
  [[noreturn]] void Fail(const std::string& what, int error);
  bool WriteAll(const void* data, size_t size);

  std::string path_;
  int fd_ = -1;
  std::string failed_what_;  // first recorded failure (WriteOrRecord)
  int failed_errno_ = 0;
};

}  // namespace comlrl
