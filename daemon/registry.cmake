# The registry: sessions, allocations, versions, leases, waits, watches.
find_package(spdlog REQUIRED)
find_package(Boost 1.81 REQUIRED)
find_package(fmt REQUIRED)

# Random hex for names and tokens (getrandom), shared by the pool and the registry.
add_library(hurrayd_random STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/random_hex.cc)
target_include_directories(hurrayd_random PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayd_random PUBLIC hurray_core PRIVATE fmt::fmt hurray_warnings)

add_library(hurrayd_registry STATIC
  src/allocation_table.cc
  src/inspection.cc
  src/registry.cc
  src/session_table.cc
  src/tensor_name.cc
  src/version_store.cc
  src/wait_set.cc
  src/watch_hub.cc)
target_include_directories(hurrayd_registry PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayd_registry
  PUBLIC hurray_core hurray_service_proto Boost::headers spdlog::spdlog Threads::Threads
  PRIVATE hurrayd_random fmt::fmt hurray_warnings)
