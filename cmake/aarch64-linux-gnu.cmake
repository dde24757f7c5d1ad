# Cross-compiling for arm64 Linux with Debian's gcc-aarch64-linux-gnu (apt: gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross qemu-user). Tests run under qemu-aarch64 through
# CMAKE_CROSSCOMPILING_EMULATOR (ctest prepends it). scripts/arm64-ci.sh uses this file:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# With -DIQF_ARM64_CLANG=ON it compiles with clang --target=aarch64-linux-gnu instead (the same
# sysroot and binutils).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(IQF_ARM64_CLANG)
  set(CMAKE_C_COMPILER clang)
  set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
else()
  set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
