# hurrayctl, the operator's tool, and hurray_npy, the NumPy .npy reader and writer it uses.
find_package(CLI11 REQUIRED)

# .npy headers: pure functions over bytes, unit tested on their own.
add_library(hurray_npy STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/npy.cc)
target_include_directories(hurray_npy PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurray_npy PUBLIC hurray_core PRIVATE hurray_warnings)

# Sizes, times and tables for hurrayctl's text output.
add_library(hurrayctl_format STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/hurrayctl_format.cc)
target_include_directories(hurrayctl_format PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(hurrayctl_format PRIVATE hurray_warnings)

add_executable(hurrayctl
  ${CMAKE_CURRENT_SOURCE_DIR}/src/hurrayctl.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/hurrayctl_commands.cc)
target_link_libraries(hurrayctl PRIVATE
  hurray_client hurray_npy hurrayctl_format hurray_service_proto CLI11::CLI11
  protobuf::libprotobuf hurray_warnings)
