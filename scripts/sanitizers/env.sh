# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: how the ASan+UBSan build's programs report.
# Every report fails the program (exit code or abort), with file:line stack traces.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="${QFORGE_ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$here/ubsan.supp"
