add_executable(daemon_registry_tests
  registry_test.cc
  random_hex_test.cc
  version_store_test.cc
  wait_set_test.cc
  watch_hub_test.cc)
target_link_libraries(daemon_registry_tests PRIVATE hurrayd_registry hurrayd_pool hurrayd_random
                                                    hurray_testing hurray_warnings)
gtest_discover_tests(daemon_registry_tests DISCOVERY_TIMEOUT 30)

add_executable(daemon_config_tests config_test.cc)
target_compile_definitions(daemon_config_tests PRIVATE HURRAY_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(daemon_config_tests PRIVATE hurrayd_app hurray_testing hurray_warnings)
gtest_discover_tests(daemon_config_tests DISCOVERY_TIMEOUT 30)
