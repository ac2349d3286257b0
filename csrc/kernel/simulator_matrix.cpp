// The simulator's asynchronous copies and matrix statements: cp.async (landing at the wait that covers
// it), ldmatrix and mma.sync warp by warp with the PTX layouts, and wgmma per warpgroup, reading its
// operands where the descriptors point the hardware (kernel/wgmma.h) and keeping them and its
// accumulators busy until the wait that covers its group. Reported: a shared element written while a
// wgmma in flight reads it, or by another thread after the reading warpgroup's wait but before a
// barrier; a write a wgmma reads with no proxy fence by its writer after it; accumulators written with
// no wgmma fence before the wgmma, or touched while a wgmma writes them; a block ending with wgmmas in
// flight; a matrix statement reached by only part of its warp or warpgroup.
#include "kernel/simulator_state.h"

#include "kernel/wgmma.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze::kernel::sim {

void Simulator::execCpAsync(const Stmt& s, const Mask& mask) {
  const KVar& v = k_.vars[s.var];
  const int64_t element = sizeOf(v.dtype);
  const int64_t bytes = s.width * element;
  auto& flight = in_flight_[s.var];
  if (flight.empty()) flight.assign(cluster_ * v.size, 0);
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    const int64_t offset = eval(s.a, t).i, at = eval(s.b, t).i, src_bytes = eval(s.c, t).i;
    if (src_bytes < 0 || src_bytes > bytes) fail(t, fmt::format("cp.async reads {} of its {} bytes", src_bytes, bytes));
    if ((v.shared_offset + at * element) % bytes != 0) {
      fail(t, fmt::format("cp.async of {} bytes into {}[{}]: the shared address is not {}-byte aligned", bytes, v.name,
                          at, bytes));
    }
    PendingCopy copy{s.var, at, std::vector<SimValue>(s.width, SimValue{0.0, 0}), -1};
    const int64_t elements = src_bytes / element;
    if (elements > 0) {
      checkAccess(t, s.tensor, offset, elements);
      const auto address = reinterpret_cast<uintptr_t>(tensors_[s.tensor].data()) + offset * element;
      if (address % bytes != 0) {
        fail(t, fmt::format("cp.async of {} bytes from {} at element offset {} is misaligned (address % {} = {})",
                            bytes, k_.tensors[s.tensor].name, offset, bytes, address % bytes));
      }
    }
    for (int64_t j = 0; j < elements; ++j) copy.values[j] = read(s.tensor, offset + j);
    for (int64_t j = 0; j < s.width; ++j) {
      if (at + j < 0 || at + j >= v.size) fail(t, fmt::format("cp.async into {}[{}] outside its {} elements", v.name, at + j, v.size));
      // The copy may land at once: it is this thread's write from its issue on, so a read of the element
      // by another thread since the last barrier (a stage refilled while still being read) is reported.
      noteShared(s.var, t, at + j, true);
      ++flight[sharedKey(s.var, t, at + j)];
    }
    pending_[t].push_back(std::move(copy));
  }
}

void Simulator::execCpAsyncCommit(const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    for (PendingCopy& copy : pending_[t]) {
      if (copy.group < 0) copy.group = groups_[t];
    }
    ++groups_[t];
  }
}

void Simulator::execCpAsyncWait(const Stmt& s, const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    auto& copies = pending_[t];
    const int64_t newest_kept = groups_[t] - s.width;  // groups below this one land
    std::vector<PendingCopy> kept;
    for (PendingCopy& copy : copies) {
      if (copy.group < 0 || copy.group >= newest_kept) {
        kept.push_back(std::move(copy));
        continue;
      }
      auto& flight = in_flight_[copy.var];
      for (size_t j = 0; j < copy.values.size(); ++j) {
        --flight[sharedKey(copy.var, t, copy.at + static_cast<int64_t>(j))];
        noteShared(copy.var, t, copy.at + static_cast<int64_t>(j), true);
        noteUnfenced(copy.var, t, copy.at + static_cast<int64_t>(j));
        arrayAt(copy.var, t, copy.at + static_cast<int64_t>(j)) = copy.values[j];
      }
    }
    copies = std::move(kept);
  }
}

void Simulator::execLdmatrix(const Stmt& s, const Mask& mask) {
  const VarId from = s.mma_operands[0];
  const KVar& src = k_.vars[from];
  const int64_t element = sizeOf(src.dtype);
  const int64_t row_elements = 16 / element, per = 4 / element;
  for (int64_t warp = 0; warp * 32 < threads_; ++warp) {
    int64_t active = 0;
    for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) active += mask[t] ? 1 : 0;
    if (active == 0) continue;
    for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) {
      if (!mask[t]) fail(t, "ldmatrix reached by only part of its warp (this lane is inactive)");
    }
    std::vector<int64_t> rows(8 * s.width);
    for (int64_t r = 0; r < 8 * s.width; ++r) {
      const int64_t t = warp * 32 + r;
      rows[r] = eval(s.a, t).i;
      if ((src.shared_offset + rows[r] * element) % 16 != 0) {
        fail(t, fmt::format("ldmatrix row {}[{}] is not 16-byte aligned", src.name, rows[r]));
      }
      for (int64_t j = 0; j < row_elements; ++j) {
        requireLanded(from, t, rows[r] + j);
        noteShared(from, t, rows[r] + j, false);
      }
    }
    for (int64_t m = 0; m < s.width; ++m) {
      std::array<int, 8> groups{};
      for (int64_t r = 0; r < 8; ++r) ++groups[((src.shared_offset + rows[m * 8 + r] * element) / 16) % 8];
      if (stats_ != nullptr) {
        ++stats_->ldmatrix_phases;
        stats_->ldmatrix_bank_conflicts += *std::max_element(groups.begin(), groups.end()) - 1;
      }
    }
    for (int64_t lane = 0; lane < 32; ++lane) {
      const int64_t t = warp * 32 + lane;
      const int64_t at = eval(s.b, t).i;
      for (int64_t m = 0; m < s.width; ++m) {
        for (int64_t i = 0; i < per; ++i) {
          // Not transposed: row lane / 4, elements per * (lane % 4) + i. Transposed (16-bit): column
          // lane / 4 of rows 2 (lane % 4) + i.
          const int64_t index = s.transpose ? rows[m * 8 + 2 * (lane % 4) + i] + lane / 4
                                            : rows[m * 8 + lane / 4] + per * (lane % 4) + i;
          arrayAt(s.var, t, at + m * per + i) = arrayAt(from, t, index);
        }
      }
    }
  }
}

void Simulator::execMma(const Stmt& s, const Mask& mask) {
  const MmaDims dims = mmaDims(s.mma_shape);
  const bool integer = mmaAccumulator(s.mma_shape, k_.vars[s.mma_operands[0]].dtype) == DataType::Int32;
  const VarId a = s.mma_operands[0], b = s.mma_operands[1], c = s.mma_operands[2];
  for (int64_t warp = 0; warp * 32 < threads_; ++warp) {
    // A warp that did not reach the mma (a warp-uniform branch) takes no part; a partial one is an error.
    int64_t active = 0;
    for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) active += mask[t] ? 1 : 0;
    if (active == 0) continue;
    for (int64_t t = warp * 32; t < warp * 32 + 32; ++t) {
      if (!mask[t]) fail(t, fmt::format("mma.{} reached by only part of its warp (this lane is inactive)", toString(s.mma_shape)));
    }
    std::vector<double> fa(dims.m * dims.k), fb(dims.k * dims.n), fc(dims.m * dims.n);
    for (int lane = 0; lane < 32; ++lane) {
      const int64_t t = warp * 32 + lane;
      auto value = [&](VarId var, int i) {
        const SimValue& v = arrayAt(var, t, i);
        return integer ? static_cast<double>(v.i) : v.f;
      };
      for (int i = 0; i < dims.a_values; ++i) {
        const MatrixPosition p = mmaAPosition(s.mma_shape, lane, i);
        fa[p.row * dims.k + p.col] = value(a, i);
      }
      for (int i = 0; i < dims.b_values; ++i) {
        const MatrixPosition p = mmaBPosition(s.mma_shape, lane, i);
        fb[p.row * dims.n + p.col] = value(b, s.b_offset + i);
      }
      for (int i = 0; i < dims.c_values; ++i) {
        const MatrixPosition p = mmaCPosition(lane, i);
        fc[p.row * dims.n + p.col] = value(c, i);
      }
    }
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < dims.c_values; ++i) {
        const MatrixPosition p = mmaCPosition(lane, i);
        SimValue& d = arrayAt(s.var, warp * 32 + lane, i);
        if (integer) {
          int64_t sum = static_cast<int64_t>(fc[p.row * dims.n + p.col]);
          for (int k = 0; k < dims.k; ++k) {
            sum += static_cast<int64_t>(fa[p.row * dims.k + k]) * static_cast<int64_t>(fb[k * dims.n + p.col]);
          }
          d.i = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)));
        } else {
          double sum = 0;
          for (int k = 0; k < dims.k; ++k) sum += fa[p.row * dims.k + k] * fb[k * dims.n + p.col];
          d.f = static_cast<float>(sum + fc[p.row * dims.n + p.col]);
        }
      }
    }
  }
}

bool Simulator::warpgroupActive(int64_t g, const Mask& mask, const char* what) {
  int64_t active = 0;
  for (int64_t t = g * 128; t < g * 128 + 128; ++t) active += mask[t] ? 1 : 0;
  if (active == 0) return false;
  for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
    if (!mask[t]) fail(t, fmt::format("{} reached by only part of its warpgroup (this thread is inactive)", what));
  }
  return true;
}

void Simulator::execWgmma(const Stmt& s, const Mask& mask) {
  const int64_t n = s.width;
  const DataType operand_dtype = k_.vars[s.mma_operands[0]].dtype;
  const bool integer = !isFloating(operand_dtype);
  const int64_t depth = wgmmaK(sizeOf(operand_dtype));
  for (int64_t g = 0; g * 128 < threads_; ++g) {
    if (!warpgroupActive(g, mask, "wgmma")) continue;
    WgmmaInFlight flight{s.var, {}, -1};
    std::vector<double> matrices[2] = {std::vector<double>(kWgmmaM * depth), std::vector<double>(depth * n)};
    for (int operand = 0; operand < 2; ++operand) {
      const VarId var = s.mma_operands[operand];
      const KVar& v = k_.vars[var];
      const int64_t element = sizeOf(v.dtype);
      const int64_t at = eval(operand == 0 ? s.a : s.b, g * 128).i;
      for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
        if (eval(operand == 0 ? s.a : s.b, t).i != at) fail(t, "wgmma operand start differs within the warpgroup");
      }
      const int64_t start = v.shared_offset + at * element;
      const int64_t mn_extent = operand == 0 ? kWgmmaM : n;
      auto& reading = wgmma_reading_[var];
      if (reading.empty()) reading.assign(cluster_ * v.size, 0);
      for (int64_t mn = 0; mn < mn_extent; ++mn) {
        for (int64_t k = 0; k < depth; ++k) {
          const int64_t byte = wgmmaElementByte(s.wgmma_operands[operand], start, mn, k, element) - v.shared_offset;
          if (byte % element != 0 || byte < 0 || byte / element >= v.size) {
            fail(g * 128, fmt::format("wgmma reads {} element ({}, {}) at shared byte {}, outside its {} elements",
                                      v.name, mn, k, byte + v.shared_offset, v.size));
          }
          const int64_t i = byte / element, key = sharedKey(var, g * 128, i);
          requireLanded(var, g * 128, i);
          noteShared(var, g * 128, i, false);
          if (auto it = unfenced_.find(var); it != unfenced_.end() && it->second[key] != 0) {
            fail(g * 128, fmt::format("wgmma reads shared {}, which thread {} wrote with no proxy fence after the write",
                                      elementName(var, key), it->second[key] - 1));
          }
          ++reading[key];
          flight.reads.emplace_back(var, i);
          const SimValue& held = arrayAt(var, g * 128, i);
          const double value = integer ? static_cast<double>(held.i) : held.f;
          if (operand == 0) {
            matrices[0][mn * depth + k] = value;
          } else {
            matrices[1][k * n + mn] = value;
          }
        }
      }
    }
    if (unfenced_accumulators_.count({g, s.var})) {
      fail(g * 128, fmt::format("wgmma accumulates into {}, written since the warpgroup's last wgmma fence", k_.vars[s.var].name));
    }
    for (int64_t t = g * 128; t < g * 128 + 128; ++t) {
      requireAccumulatorsDone(s.var, t, true);
      for (int64_t i = 0; i < n / 2; ++i) {
        const MatrixPosition p = wgmmaDPosition(static_cast<int>(t - g * 128), static_cast<int>(i));
        SimValue& d = arrayAt(s.var, t, i);
        if (integer) {  // exact, wrapped to int32 as s32 accumulators without .satfinite are
          int64_t sum = d.i;
          for (int64_t k = 0; k < depth; ++k) {
            sum += static_cast<int64_t>(matrices[0][p.row * depth + k]) * static_cast<int64_t>(matrices[1][k * n + p.col]);
          }
          d.i = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)));
        } else {
          double sum = 0;
          for (int64_t k = 0; k < depth; ++k) sum += matrices[0][p.row * depth + k] * matrices[1][k * n + p.col];
          d.f = static_cast<float>(sum + d.f);
        }
      }
    }
    ++busy_accumulators_[{g, s.var}];
    wgmma_pending_[g].push_back(std::move(flight));
  }
}

void Simulator::execWgmmaCommit(const Mask& mask) {
  for (int64_t g = 0; g * 128 < threads_; ++g) {
    if (!warpgroupActive(g, mask, "wgmma commit")) continue;
    for (WgmmaInFlight& w : wgmma_pending_[g]) {
      if (w.group < 0) w.group = wgmma_groups_[g];
    }
    ++wgmma_groups_[g];
  }
}

void Simulator::execWgmmaWait(const Stmt& s, const Mask& mask) {
  for (int64_t g = 0; g * 128 < threads_; ++g) {
    if (!warpgroupActive(g, mask, "wgmma wait")) continue;
    const int64_t newest_kept = wgmma_groups_[g] - s.width;
    std::vector<WgmmaInFlight> kept;
    for (WgmmaInFlight& w : wgmma_pending_[g]) {
      if (w.group < 0 || w.group >= newest_kept) {
        kept.push_back(std::move(w));
        continue;
      }
      // The reads end here, as the warpgroup's: a thread of another warpgroup writing the elements before a
      // barrier (which that warpgroup's wait may not have passed yet) is reported.
      for (const auto& [var, i] : w.reads) {
        --wgmma_reading_[var][sharedKey(var, g * 128, i)];
        noteShared(var, g * 128, i, false);
      }
      if (--busy_accumulators_[{g, w.accumulators}] == 0) busy_accumulators_.erase({g, w.accumulators});
    }
    wgmma_pending_[g] = std::move(kept);
  }
}

void Simulator::execProxyFence(const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    for (const auto& [var, i] : unfenced_list_[t]) {
      if (unfenced_[var][i] == t + 1) unfenced_[var][i] = 0;
    }
    unfenced_list_[t].clear();
  }
}

void Simulator::requireAccumulatorsDone(VarId var, int64_t t, bool by_wgmma, bool write) {
  // A write (wgmma kernels only) needs a wgmma fence before a wgmma accumulates into the array.
  if (write && k_.arch_specific) unfenced_accumulators_.insert({t / 128, var});
  if (by_wgmma || busy_accumulators_.empty() || !busy_accumulators_.count({t / 128, var})) return;
  fail(t, fmt::format("touches {}, the accumulators of a wgmma in flight (no wgmma wait covers it)", k_.vars[var].name));
}

void Simulator::noteUnfenced(VarId var, int64_t t, int64_t i) {
  if (!k_.arch_specific) return;  // no wgmma reads the writes
  auto& marks = unfenced_[var];
  if (marks.empty()) marks.assign(cluster_ * k_.vars[var].size, 0);
  const int64_t key = sharedKey(var, t, i);
  marks[key] = static_cast<int32_t>(t + 1);
  unfenced_list_[t].emplace_back(var, key);
}


}  // namespace braze::kernel::sim
