# Tests of huge pages for the CPU pool (daemon/src/huge_pages.h): the choice from made-up
# host facts, pools with each backing, and real transparent and explicit huge pages where
# the host lets a test arrange them (as root, in a private mount namespace; otherwise they
# skip, saying why).
add_executable(daemon_huge_pages_tests ${CMAKE_CURRENT_SOURCE_DIR}/huge_pages_test.cc)
target_link_libraries(daemon_huge_pages_tests PRIVATE hurrayd_pool hurray_testing hurray_warnings)
gtest_discover_tests(daemon_huge_pages_tests DISCOVERY_TIMEOUT 30)
