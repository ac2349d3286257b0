// The HIP runtime underneath the cache of freed device memory (StreamBlockCache): blocks from the device's
// stream-ordered pool (hipMallocAsync, hipFreeAsync), streams known by hipStreamGetId.
#pragma once

#include "device/device_ops.h"
#include "device/hip/hip_runtime.h"
#include "device/stream_block_cache.h"

namespace braze::device {

// What the cache asks of `api` for the device `device` stands for (entered around a release and the wait
// before a trim, which may run on any thread). A runtime without hipStreamGetId gives no stream an
// identity, so that nothing is kept: a stream's handle is the address of its object, which a new stream
// may take while the old one's work still runs. The per-thread default stream has none either (it is
// another stream on each thread), and without hipStreamIsCapturing no stream counts as captured.
BlockSource hipBlockSource(const HipRuntime& api, DeviceOps& device);

}  // namespace braze::device
