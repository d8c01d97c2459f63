# The registry: sessions, allocations, versions, leases, waits, watches.
find_package(spdlog REQUIRED)
find_package(Boost 1.81 REQUIRED)
add_library(hurrayd_registry STATIC
  src/registry.cc
  src/tensor_name.cc)
target_include_directories(hurrayd_registry PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayd_registry
  PUBLIC hurray_core hurray_service_proto Boost::headers spdlog::spdlog Threads::Threads
  PRIVATE hurray_warnings)
