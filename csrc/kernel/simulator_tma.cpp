// The simulator's mbarriers and TMA loads. A TMA load reads its box (zeros outside the tensor) when it is
// issued, and lands when a thread waits on the mbarrier phase it completes: lazily, so that a thread
// reading the box's shared elements before its wait reads elements still in flight, which is reported.
// The box's rows lie one after the other from the destination; a swizzled box's 128-byte rows are placed
// by the same 128-byte swizzle wgmma reads (kernel/wgmma.h), so a wgmma finds the elements where TMA put
// them. Phases complete when all their arrivals are in and exactly the bytes announced by
// arrive.expect_tx have landed. A landed box is visible to the threads that waited on its phase, and to
// every thread after the next barrier; a wait whose outcome depends on whether an armed and filled phase
// has completed yet is reported as the race it is. A wait also acquires what the phase's arrivals
// released: a shared element another thread read or wrote before arriving may then be written (or read)
// by the waiter without a barrier, which is how a warp-specialized pipeline hands stages back and forth.
// In a kernel with clusters every block has mbarriers of its own: a thread may arrive on another block's
// (after a cluster barrier made its init visible), and a multicast load lands its box in each block it
// names, counting its bytes on that block's mbarrier; such bytes may land before the arrival that expects
// them, as on a GPU.
#include "kernel/simulator_state.h"

#include "kernel/wgmma.h"
#include "support/error.h"

#include <fmt/format.h>

namespace braze::kernel::sim {

int64_t Simulator::mbarrierKey(VarId var, int64_t t, ExprId at, int64_t rank) {
  const KVar& v = k_.vars[var];
  if (mbarriers_.find(var) == mbarriers_.end()) fail(t, fmt::format("uses mbarriers {} before their declaration", v.name));
  const int64_t i = eval(at, t).i;
  if (i < 0 || i >= v.size) fail(t, fmt::format("mbarrier {}[{}] outside its {}", v.name, i, v.size));
  if (rank >= cluster_) fail(t, fmt::format("mbarrier {}[{}] of cluster rank {} in clusters of {}", v.name, i, rank, cluster_));
  return (rank >= 0 ? rank : rankOf(t)) * v.size + i;
}

Simulator::MbarrierState& Simulator::mbarrierAt(VarId var, int64_t t, int64_t key, bool initializing) {
  MbarrierState& m = mbarriers_.at(var)[key];
  if (!initializing) {
    if (!m.initialized) fail(t, fmt::format("uses mbarrier {} before it is initialized", elementName(var, key)));
    if (m.init_thread != t && m.init_epoch == epoch_) {
      fail(t, fmt::format("uses mbarrier {}, which thread {} initialized, with no barrier in between",
                          elementName(var, key), m.init_thread));
    }
    // Another block's mbarrier: its init is visible across the cluster only after a cluster barrier.
    if (key / k_.vars[var].size != rankOf(t) && m.init_cluster_epoch == cluster_epoch_) {
      fail(t, fmt::format("uses mbarrier {}, which another block of the cluster initialized, with no cluster barrier "
                          "in between",
                          elementName(var, key)));
    }
  }
  return m;
}

void Simulator::execMbarrierInit(const Stmt& s, const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    MbarrierState& m = mbarrierAt(s.var, t, mbarrierKey(s.var, t, s.a), true);
    if (!m.copies.empty()) fail(t, fmt::format("initializes mbarrier {} while TMA copies complete on it", k_.vars[s.var].name));
    m = MbarrierState{};
    m.initialized = true;
    m.init_thread = t;
    m.init_epoch = epoch_;
    m.init_cluster_epoch = cluster_epoch_;
    m.arrivals = m.pending = s.width;
    ++progress_;
  }
}

void Simulator::completePhase(MbarrierState& m) {
  ++m.completed;
  m.pending = m.arrivals;
  m.expected_bytes = m.delivered_bytes = 0;
  m.arrivals_done = std::move(m.arrivals_now);
  m.arrivals_now.clear();
}

void Simulator::execMbarrierArrive(const Stmt& s, const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    const int64_t rank = s.c >= 0 ? eval(s.c, t).i : -1;
    if (s.c >= 0 && rank < 0) fail(t, fmt::format("arrives on mbarrier {} of cluster rank {}", k_.vars[s.var].name, rank));
    const int64_t key = mbarrierKey(s.var, t, s.a, rank);
    MbarrierState& m = mbarrierAt(s.var, t, key);
    if (key / k_.vars[s.var].size != rankOf(t)) remote_since_cluster_barrier_ = true;
    const int64_t bytes = eval(s.b, t).i;
    if (bytes < 0) fail(t, fmt::format("expects {} transaction bytes on mbarrier {}", bytes, k_.vars[s.var].name));
    if (m.pending == 0) {
      fail(t, fmt::format("arrives on mbarrier {}{} whose phase has all its {} arrivals and has not been waited on",
                          k_.vars[s.var].name,
                          cluster_ == 1 ? std::string() : fmt::format(" of the cluster's block {}", key / k_.vars[s.var].size),
                          m.arrivals));
    }
    --m.pending;
    ++progress_;
    m.expected_bytes += bytes;
    // The arrival releases the thread's accesses so far to whoever waits on the phase.
    m.arrivals_now.emplace_back(t, ++releases_[t]);
    // Bytes may land before the arrival that expects them (another block's multicast copy), but not more
    // than the phase's arrivals announce.
    if (m.pending == 0 && m.delivered_bytes > m.expected_bytes) {
      fail(t, fmt::format("TMA copies delivered {} bytes to mbarrier {}, whose phase expects {}", m.delivered_bytes,
                          elementName(s.var, key), m.expected_bytes));
    }
    // A phase with nothing left to land completes with its last arrival.
    if (m.pending == 0 && m.copies.empty() && m.delivered_bytes == m.expected_bytes) completePhase(m);
  }
}

void Simulator::landCopies(MbarrierState& m, VarId var, int64_t index, int64_t t) {
  for (PendingTma& copy : m.copies) {
    auto& flight = tma_in_flight_[copy.var];
    auto& access = shared_[copy.var];
    for (size_t j = 0; j < copy.elements.size(); ++j) {
      const int64_t e = copy.elements[j];  // a key: the copy may have been another block's multicast
      --flight[e];
      sharedElement(copy.var, e) = copy.values[j];
      // Written by the copy engine, not by a thread: visible to the threads that wait on the phase (and to
      // every thread after the next barrier).
      access[e] = SharedAccess{};
      many_readers_.erase({copy.var, e});
      tma_landed_[{copy.var, e}] = LandedBy{var, index, m.completed + 1};
    }
    m.delivered_bytes += copy.bytes;
  }
  m.copies.clear();
  if (m.pending == 0 && m.delivered_bytes > m.expected_bytes) {
    fail(t, fmt::format("TMA copies delivered {} bytes to mbarrier {}, whose phase expects {}", m.delivered_bytes,
                        elementName(var, index), m.expected_bytes));
  }
  if (m.pending == 0 && m.delivered_bytes == m.expected_bytes) completePhase(m);
}

void Simulator::execMbarrierWait(const Stmt& s, const Mask& mask) {
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    const int64_t index = mbarrierKey(s.var, t, s.a), parity = eval(s.b, t).i;
    MbarrierState& m = mbarrierAt(s.var, t, index);
    if (parity != 0 && parity != 1) fail(t, fmt::format("waits on mbarrier parity {}", parity));
    auto& waited = waited_[{s.var, index}];
    if (waited.empty()) waited.assign(threads_, 0);
    // The wait acquires what the arrivals of the phase it waited for released.
    auto acquire = [&](const MbarrierState& done) {
      for (const auto& [u, release] : done.arrivals_done) {
        int32_t& seen = acquired_[t * threads_ + u];
        seen = std::max(seen, static_cast<int32_t>(release));
      }
    };
    // Done when the phase of that parity is the last completed one (the current phase has the other).
    if (m.completed % 2 != parity) {
      // Unless the current phase has all it waits for: on a GPU it may complete first, and then this wait
      // waits for the next one.
      int64_t issued = m.delivered_bytes;
      for (const PendingTma& copy : m.copies) issued += copy.bytes;
      if (m.pending == 0 && issued == m.expected_bytes) {
        fail(t, fmt::format("waits on mbarrier {} for parity {}, which passes or blocks depending on whether its "
                            "current phase, armed and filled, has completed yet",
                            elementName(s.var, index), parity));
      }
      waited[t] = m.completed;
      acquire(m);
      continue;
    }
    landCopies(m, s.var, index, t);
    // In branches that run at once, the other branch may yet arrive or issue what completes the phase.
    if (m.completed % 2 == parity && interleaving_ != nullptr && handOver()) {
      --t;  // this thread waits again
      continue;
    }
    if (m.completed % 2 == parity) {
      fail(t, fmt::format("waits on mbarrier {} for its phase of parity {}, which never completes: {} of its {} "
                          "arrivals missing, {} of {} expected bytes delivered",
                          elementName(s.var, index), parity, m.pending, m.arrivals, m.delivered_bytes, m.expected_bytes));
    }
    waited[t] = m.completed;
    acquire(m);
  }
}

void Simulator::execTmaLoad(const Stmt& s, const Mask& mask) {
  const TensorParam& tensor = k_.tensors[s.tensor];
  const TensorParam::TmaBox& box = *tensor.tma;
  const KVar& v = k_.vars[s.var];
  const int64_t element = sizeOf(tensor.dtype), row_bytes = box.box_columns * element;
  const StridedLayout& layout = tma_maps_[s.tensor] ? *tma_maps_[s.tensor] : box.map;
  auto& flight = tma_in_flight_[s.var];
  if (flight.empty()) flight.assign(cluster_ * v.size, 0);
  for (int64_t t = 0; t < threads_; ++t) {
    if (!mask[t]) continue;
    const int64_t at = eval(s.a, t).i, column = eval(s.b, t).i, row = eval(s.c, t).i;
    // A 3D map: [batch, rows, columns]; the box lies in one batch.
    const size_t r0 = layout.sizes.size() - 2;
    const int64_t batch = s.e >= 0 ? eval(s.e, t).i : 0;
    const bool batch_inside = s.e < 0 || (batch >= 0 && batch < layout.sizes[0]);
    const int64_t batch_offset = s.e >= 0 ? batch * layout.strides[0] : 0;
    const int64_t start = v.shared_offset + at * element;  // the box's first shared byte
    if (start % (box.swizzle ? 1024 : 128) != 0) {
      fail(t, fmt::format("a TMA load into {}[{}]: shared byte {} is not {}-byte aligned", v.name, at, start,
                          box.swizzle ? 1024 : 128));
    }
    // The box's elements: read once, at their place in a block's array.
    std::vector<int64_t> elements;
    std::vector<SimValue> values;
    for (int64_t r = 0; r < box.box_rows; ++r) {
      for (int64_t c = 0; c < box.box_columns; ++c) {
        const int64_t gr = row + r, gc = column + c;
        SimValue value{0.0, 0};
        if (batch_inside && gr >= 0 && gr < layout.sizes[r0] && gc >= 0 && gc < layout.sizes[r0 + 1]) {
          const int64_t offset = layout.offset + batch_offset + gr * layout.strides[r0] + gc;
          checkAccess(t, s.tensor, offset, 1);
          value = read(s.tensor, offset);
        }
        int64_t byte = start + r * row_bytes + c * element;
        if (box.swizzle) byte = swizzle128(byte);
        const int64_t e = (byte - v.shared_offset) / element;
        if (e < 0 || e >= v.size) {
          fail(t, fmt::format("a TMA load's box element ({}, {}) falls at {}[{}], outside its {} elements", r, c, v.name,
                              e, v.size));
        }
        elements.push_back(e);
        values.push_back(value);
      }
    }
    // Into this block, or into each block of the multicast, completing on that block's mbarrier.
    for (int64_t rank = 0; rank < cluster_; ++rank) {
      if (s.multicast == 0 ? rank != rankOf(t) : (s.multicast >> rank & 1) == 0) continue;
      MbarrierState& m = mbarrierAt(s.mma_operands[0], t, mbarrierKey(s.mma_operands[0], t, s.d, rank));
      if (rank != rankOf(t)) remote_since_cluster_barrier_ = true;
      PendingTma copy{s.var, {}, values, box.box_rows * row_bytes};
      for (const int64_t e : elements) {
        const int64_t key = rank * v.size + e;
        if (flight[key] > 0) {
          fail(t, fmt::format("a TMA load into {}, which another TMA copy in flight writes", elementName(s.var, key)));
        }
        // Issued by this thread: a read of the element by another thread since the last barrier (a stage
        // refilled while still being read) is reported.
        noteSharedKey(s.var, t, key, true);
        ++flight[key];
        copy.elements.push_back(key);
      }
      m.copies.push_back(std::move(copy));
    }
    ++progress_;
  }
}

void Simulator::requireTmaLandedKey(VarId var, int64_t t, int64_t i, bool write) {
  auto it = tma_in_flight_.find(var);
  if (it != tma_in_flight_.end() && it->second[i] > 0) {
    fail(t, fmt::format("{} shared {} while a TMA copy into it is in flight (no mbarrier wait covers it)",
                        write ? "writes" : "reads", elementName(var, i)));
  }
  if (write || tma_landed_.empty()) return;
  auto landed = tma_landed_.find({var, i});
  if (landed == tma_landed_.end()) return;
  const LandedBy& by = landed->second;
  auto waited = waited_.find({by.mbarriers, by.index});
  if (waited == waited_.end() || waited->second[t] < by.phases) {
    fail(t, fmt::format("reads shared {}, which a TMA copy wrote, without waiting on mbarrier {} for it (nor "
                        "a barrier after a thread that did)",
                        elementName(var, i), elementName(by.mbarriers, by.index)));
  }
}

void Simulator::requireNoTmaInFlight() {
  for (const auto& [var, barriers] : mbarriers_) {
    for (const MbarrierState& m : barriers) {
      if (!m.copies.empty()) {
        fail(0, fmt::format("the block ends with TMA copies in flight on mbarriers {} (no wait covers them)",
                            k_.vars[var].name));
      }
    }
  }
}

}  // namespace braze::kernel::sim
