// Whether this build runs under AddressSanitizer (scripts/sanitize.sh): GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature(address_sanitizer).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define QFORGE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QFORGE_ASAN 1
#endif
#endif
