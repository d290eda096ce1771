// Process-wide allocator policy for the qforge command-line tool.
#pragma once

namespace qforge {

// glibc serves every allocation above 32 MiB (its largest mmap threshold) with a fresh mmap, so a
// large activation is page-faulted again on every run: MobileNetV2 at batch 8 spent two thirds
// of its time there. This keeps large blocks on the heap (no mmap) and freed memory in the
// process for reuse, and makes ATen allocate tensors from qforge's pool (core/tensor_pool.h),
// which hands a freed block back to the next request of its size. Only the CLI calls it unasked:
// a library must not change its host's malloc (Python's qforge.configure_allocator() applies it
// on request). Set QFORGE_MALLOC_TUNING=0 to leave glibc's and ATen's defaults; AddressSanitizer
// builds leave them too. Returns true when the policy was applied.
bool configureAllocator();

}  // namespace qforge
