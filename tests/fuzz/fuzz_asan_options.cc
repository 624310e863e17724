// AddressSanitizer defaults for the libFuzzer targets (linked into each of them by
// tests/fuzz/CMakeLists.txt, not into the seed replayers of the main build). ASAN_OPTIONS in the
// environment still overrides each of them. docs/fuzzing.md, "Speed", has the measurements.
//
// - malloc_context_size=0: no stack trace recorded at every malloc and free. A report still
//   names the faulting access and its stack; replay the input with
//   ASAN_OPTIONS=malloc_context_size=30 for the allocation's and the free's.
// - quarantine_size_mb=64: freed memory is held back this long before reuse (the
//   default holds 256 MB). One execution frees far less than this, so a use after free within
//   an execution is still caught, while memory is reused warm instead of new pages faulting in.
extern "C" const char* __asan_default_options() {
  return "malloc_context_size=0:quarantine_size_mb=64";
}
