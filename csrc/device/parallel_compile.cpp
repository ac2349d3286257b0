#include "device/parallel_compile.h"

#include "support/error.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

namespace braze::device {
namespace {

// Throws the first error in job order (the same one whatever order the threads finished in), naming
// the other kernels that failed so one run shows every broken kernel of the plan.
void throwFirstError(const std::vector<CompileJob>& jobs, const std::vector<std::exception_ptr>& errors) {
  const auto first = std::find_if(errors.begin(), errors.end(), [](const std::exception_ptr& e) { return e != nullptr; });
  if (first == errors.end()) return;
  std::vector<std::string> others;
  for (auto it = first + 1; it != errors.end(); ++it) {
    if (*it) others.push_back(jobs[static_cast<size_t>(it - errors.begin())].name);
  }
  if (others.empty()) std::rethrow_exception(*first);
  try {
    std::rethrow_exception(*first);
  } catch (const Error& error) {  // anything else (bad_alloc) goes on unchanged
    throw Error(error.kind(), fmt::format("{}\n({} more kernel(s) of this plan failed to compile: {})", error.what(),
                                          others.size(), fmt::join(others, ", ")));
  }
}

}  // namespace

std::vector<CachedKernel> compileAll(const std::vector<CompileJob>& jobs, KernelCache& cache) {
  std::vector<CachedKernel> results(jobs.size());
  std::vector<std::exception_ptr> errors(jobs.size());
  std::atomic<size_t> next{0};
  // Each worker takes the next job until none is left. Nothing may escape a thread (that would be
  // std::terminate), so every exception is kept for its job and thrown after the join.
  auto work = [&]() noexcept {
    for (size_t i = next.fetch_add(1); i < jobs.size(); i = next.fetch_add(1)) {
      try {
        results[i] = cache.compile(jobs[i].source, jobs[i].name, jobs[i].options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: fewer workers, same results
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  throwFirstError(jobs, errors);
  return results;
}

}  // namespace braze::device
