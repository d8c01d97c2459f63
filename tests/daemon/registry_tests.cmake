add_executable(daemon_registry_tests registry_test.cc)
target_link_libraries(daemon_registry_tests PRIVATE hurrayd_registry hurrayd_pool hurray_testing
                                                    hurray_warnings)
gtest_discover_tests(daemon_registry_tests DISCOVERY_TIMEOUT 30)

add_executable(daemon_config_tests config_test.cc)
target_compile_definitions(daemon_config_tests PRIVATE HURRAY_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(daemon_config_tests PRIVATE hurrayd_app hurray_testing hurray_warnings)
gtest_discover_tests(daemon_config_tests DISCOVERY_TIMEOUT 30)

add_executable(daemon_tests daemon_test.cc)
target_link_libraries(daemon_tests PRIVATE hurrayd_app hurray_testing hurray_warnings)
gtest_discover_tests(daemon_tests DISCOVERY_TIMEOUT 30)
