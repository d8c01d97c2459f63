# Tests of the CPU pool (daemon/pool.cmake): RangeAllocator, ShmSegment through CpuPool.
add_executable(daemon_pool_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/range_allocator_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu_pool_test.cc)
target_link_libraries(daemon_pool_tests PRIVATE hurrayd_pool hurray_testing hurray_warnings)
gtest_discover_tests(daemon_pool_tests DISCOVERY_TIMEOUT 30)
