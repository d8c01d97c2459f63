# The CPU pool of hurrayd: range bookkeeping, shared-memory segments (POSIX shm or hugetlbfs),
# the choice of huge pages, and the Pool over them.
find_package(Boost 1.81 REQUIRED)  # Interprocess is header-only.
find_package(spdlog REQUIRED)

add_library(hurrayd_pool STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cpu_pool.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/huge_pages.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/range_allocator.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/shm_segment.cc)
target_include_directories(hurrayd_pool PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayd_pool
  PUBLIC hurray_core Threads::Threads rt
  PRIVATE hurrayd_random Boost::headers spdlog::spdlog hurray_warnings)
