// Errors: one exception type for user mistakes (BRAZE_CHECK) and one for bugs in braze (BRAZE_ASSERT).
// Messages say what went wrong, where, what was expected and what was got; the Python module maps
// ErrorKind to ValueError / TypeError / IndexError / RuntimeError.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace braze {

enum class ErrorKind {
  Value,     // a value is out of range or inconsistent (shapes, dims)          -> ValueError
  Type,      // a dtype or kind of value is wrong                               -> TypeError
  Index,     // an index is out of bounds                                       -> IndexError
  Runtime,   // the environment cannot do it (no driver, compile failure)       -> RuntimeError
  Internal,  // a bug in braze                                                  -> RuntimeError
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throwError(ErrorKind kind, const char* file, int line, const std::string& message);

}  // namespace braze

#define BRAZE_CHECK_KIND(kind, cond, ...)                                                   \
  do {                                                                                      \
    if (!(cond)) ::braze::throwError(kind, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

// A user mistake: a clear message, raised as ValueError in Python.
#define BRAZE_CHECK(cond, ...) BRAZE_CHECK_KIND(::braze::ErrorKind::Value, cond, __VA_ARGS__)
// A wrong dtype or kind of operand: raised as TypeError in Python.
#define BRAZE_TYPE_CHECK(cond, ...) BRAZE_CHECK_KIND(::braze::ErrorKind::Type, cond, __VA_ARGS__)
// An index out of range: raised as IndexError in Python.
#define BRAZE_INDEX_CHECK(cond, ...) BRAZE_CHECK_KIND(::braze::ErrorKind::Index, cond, __VA_ARGS__)
// An invariant of braze itself: failing it is a bug, and the message says so.
#define BRAZE_ASSERT(cond, ...) BRAZE_CHECK_KIND(::braze::ErrorKind::Internal, cond, __VA_ARGS__)
#define BRAZE_UNREACHABLE(...) ::braze::throwError(::braze::ErrorKind::Internal, __FILE__, __LINE__, fmt::format(__VA_ARGS__))
