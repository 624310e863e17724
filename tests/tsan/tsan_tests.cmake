# vstack_tsan_tests: the tests that run vstack's concurrent paths, built with ThreadSanitizer
# (-DVSTACK_TSAN=ON; `./dev.sh test` builds this target only, in build-tsan). The same test
# sources as vstack_tests, fewer of them, so that the TSan job compiles the library once and
# little else:
#   - the conformance suite's multi-queue test on every target (conformance_test.cc, targets.cc,
#     and the VHD/VHDX targets that vhd_device_test.cc and vhdx_device_test.cc register);
#   - the VHD and VHDX allocation paths (group commit, many queues, bitmaps), and the VHDX
#     BAT's pages allocated by racing writers (vhdx_bat_table_test.cc);
#   - dedup, zstd and crc32c (MetaStore commits, pins, the reclaimer), the MetaStore itself,
#     and their blocking commits over a multi-queue VHD (blocking_commit_test.cc);
#   - the NBD export with one queue per server thread, as nbdkit runs it (nbdkit itself is not
#     instrumented, so the plugin is exercised in-process by nbd_export_test.cc), and the
#     SharedSyncIo under it (and under the Python module), closed while another thread reads;
#   - CPU attribution: the sampler thread reading every tagged thread's layer and phase tags
#     (cpu_account_test.cc).
# Reports fail the test (halt_on_error); tests/tsan/tsan.supp lists each suppression's reason.
add_executable(vstack_tsan_tests
  testing/test_util.cc
  testing/recording_device.cc
  testing/layer_stack.cc
  testing/crash_workload.cc
  testing/gate_device.cc
  conformance/targets.cc
  conformance/conformance_test.cc
  formats/vhd_test_util.cc
  formats/vhd_device_test.cc
  formats/vhdx_test_util.cc
  formats/vhdx_bat_table_test.cc
  formats/vhdx_device_test.cc
  blockdev/metastore_test.cc
  blockdev/grain_engine_test.cc
  blockdev/dedup_test.cc
  blockdev/zstd_test.cc
  blockdev/crc32c_test.cc
  blockdev/blocking_commit_test.cc
  nbd/nbd_export_test.cc
  lib/shared_sync_io_test.cc
  bench/exchange_test.cc
  lib/cpu_account_test.cc
)
target_link_libraries(vstack_tsan_tests PRIVATE vstack::all GTest::gtest
                      GTest::gtest_main)
# A few VHD tests end with `vstack check` as an oracle. The CLI is not built here (it would
# double this build's compile time); ./dev.sh points VSTACK_TSAN_CLI at the normal build's.
set(VSTACK_TSAN_CLI "" CACHE FILEPATH "the vstack CLI that TSan tests run (./dev.sh: build/vstack)")
if(NOT VSTACK_TSAN_CLI)
  set(VSTACK_TSAN_CLI "/VSTACK_TSAN_CLI-is-not-set")
endif()
target_compile_definitions(vstack_tsan_tests PRIVATE VSTACK_CLI="${VSTACK_TSAN_CLI}")
target_precompile_headers(vstack_tsan_tests PRIVATE <gtest/gtest.h> <string> <vector> <memory>
                          <functional>)
set(VSTACK_TSAN_OPTIONS
    "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 history_size=4 suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan/tsan.supp")
# Of the conformance suite, the test where several threads drive one stack through their own
# queues; everything else in the binary runs, but for one single-threaded test that takes a
# minute under TSan (every creator's size rule, on large images).
gtest_discover_tests(vstack_tsan_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
  TEST_FILTER "*/Conformance.ThreadsWithOwnQueuesHammerOneStack/*"
  PROPERTIES TIMEOUT 600 LABELS tsan ENVIRONMENT "${VSTACK_TSAN_OPTIONS}")
gtest_discover_tests(vstack_tsan_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
  TEST_FILTER "-*/Conformance.*:VhdDevice.SizeRuleFollowsTheCreator"
  PROPERTIES TIMEOUT 600 LABELS tsan ENVIRONMENT "${VSTACK_TSAN_OPTIONS}")
