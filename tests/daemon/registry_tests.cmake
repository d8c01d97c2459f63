add_executable(daemon_registry_tests registry_test.cc)
target_link_libraries(daemon_registry_tests PRIVATE hurrayd_registry hurrayd_pool hurray_testing
                                                    hurray_warnings)
gtest_discover_tests(daemon_registry_tests DISCOVERY_TIMEOUT 30)
