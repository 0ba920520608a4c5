# Installing anvil (docs/usage.md, "Install for C and C++ programs"). `cmake --install BUILD
# [--prefix P]` puts:
#   bin/anvil, bin/anvil-gemm-time      the CLI and the GEMM autotuner's timing child
#   lib/libanvil_rt.so(.0, .0.1.0)      the runtime for programs that run packages: the objects of
#                                       core, dist and the runtime linked into one library that
#                                       exports the C ABI of include/anvil/anvil_c.h only
#                                       (cmake/anvil_rt.map) and needs no other anvil library
#   lib/libanvil_cuda.so                the CUDA device backend (where built), dlopened by the
#                                       runtime for CUDA packages
#   lib/anvil/                          the CLI's private libraries: libanvil_core, libanvil_dist
#                                       and libanvil_rt as the build has them (C++ exported, for
#                                       the compiler), libanvil_nccl
#   include/anvil/*.h                   the public headers (they include nothing from src/)
#   lib/cmake/anvil/                    find_package(anvil): the imported target anvil::rt
#   lib/pkgconfig/anvil.pc              pkg-config --cflags --libs anvil
# and `cpack -G DEB` (in the build folder) packs the same tree as a Debian package. The build
# itself is unchanged: the compiler, the CLI and the tests link the layers' libraries.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ANVIL_PRIVATE_LIBDIR ${CMAKE_INSTALL_LIBDIR}/anvil)
set(ANVIL_PUBLIC_DIR ${CMAKE_BINARY_DIR}/public)

# ---- libanvil_rt for programs: the three runtime layers' objects (compiled once, for the
# build's libraries) linked again, with every symbol but the C ABI made local.
set(ANVIL_RT_EXPORTS ${CMAKE_SOURCE_DIR}/cmake/anvil_rt.map)
add_library(anvil_rt_public SHARED $<TARGET_OBJECTS:anvil_core> $<TARGET_OBJECTS:anvil_dist>
                                   $<TARGET_OBJECTS:anvil_rt>)
foreach(layer IN ITEMS anvil_core anvil_dist anvil_rt)  # their libraries, less each other
  get_target_property(deps ${layer} LINK_LIBRARIES)
  foreach(dep IN LISTS deps)
    if(NOT dep MATCHES "^anvil_")
      target_link_libraries(anvil_rt_public PRIVATE ${dep})
    endif()
  endforeach()
endforeach()
target_include_directories(anvil_rt_public INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_options(anvil_rt_public PRIVATE "LINKER:--version-script=${ANVIL_RT_EXPORTS}"
                    "LINKER:--no-undefined")
set_target_properties(anvil_rt_public PROPERTIES
  OUTPUT_NAME anvil_rt EXPORT_NAME rt LINK_DEPENDS ${ANVIL_RT_EXPORTS}
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${ANVIL_PUBLIC_DIR}/lib)
if(TARGET anvil_cuda)
  add_dependencies(anvil_rt_public anvil_cuda)
endif()

# The examples, built here against that library as a program outside anvil would be (the install
# test builds them again from examples/CMakeLists.txt against the installed tree).
add_executable(example_embed_c examples/embed_c.c)
target_link_libraries(example_embed_c PRIVATE anvil_rt_public)
add_executable(example_embed_cpp examples/embed_cpp.cpp)
target_link_libraries(example_embed_cpp PRIVATE anvil_rt_public)

# ---- install rules
install(TARGETS anvil_rt_public EXPORT anvilTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/anvil DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING
        PATTERN "*.h")
install(TARGETS anvil anvil-gemm-time RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(anvil anvil-gemm-time PROPERTIES
                      INSTALL_RPATH "\$ORIGIN/../${ANVIL_PRIVATE_LIBDIR}")
set(ANVIL_PRIVATE_LIBS anvil_core anvil_dist anvil_rt)
if(TARGET anvil_nccl)
  list(APPEND ANVIL_PRIVATE_LIBS anvil_nccl)
endif()
install(TARGETS ${ANVIL_PRIVATE_LIBS} LIBRARY DESTINATION ${ANVIL_PRIVATE_LIBDIR})
set_target_properties(${ANVIL_PRIVATE_LIBS} PROPERTIES INSTALL_RPATH "\$ORIGIN")
if(TARGET anvil_cuda)
  install(TARGETS anvil_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

install(EXPORT anvilTargets NAMESPACE anvil:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/anvil)
set(ANVIL_BINDIR ${CMAKE_INSTALL_BINDIR})
configure_package_config_file(cmake/anvilConfig.cmake.in ${ANVIL_PUBLIC_DIR}/anvilConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/anvil PATH_VARS ANVIL_BINDIR)
write_basic_package_version_file(${ANVIL_PUBLIC_DIR}/anvilConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor release may change the C ABI
install(FILES ${ANVIL_PUBLIC_DIR}/anvilConfig.cmake ${ANVIL_PUBLIC_DIR}/anvilConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/anvil)
# pkg-config: the prefix is found from the .pc file's own folder, so the tree can move.
file(RELATIVE_PATH ANVIL_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(cmake/anvil.pc.in ${ANVIL_PUBLIC_DIR}/anvil.pc @ONLY)
install(FILES ${ANVIL_PUBLIC_DIR}/anvil.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- cpack -G DEB: one package with the CLI, the runtime and the headers. Dependencies on
# Debian's libraries come from dpkg-shlibdeps; a C++ compiler is needed by `anvil compile`,
# libdlpack-dev by anvil_c.h. The CUDA libraries are not Debian packages and are loaded only
# with libanvil_cuda.so, so they are not dependencies.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME anvil)
set(CPACK_PACKAGE_VENDOR anvil)
set(CPACK_PACKAGE_CONTACT "anvil maintainers <anvil@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "ahead-of-time compiler and runtime for torch.export models")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${ANVIL_PRIVATE_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_DEPENDS "g++ | c++-compiler, libdlpack-dev")
include(CPack)

# ---- tests: the install test (tests/install/install_test.cmake; label `install`, needs the
# whole build: `cmake --install` installs every target), and test_layers' checks of the public
# library's exported symbols.
if(ANVIL_BUILD_TESTS)
  add_test(NAME install_tree COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
           -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DGENERATOR=${CMAKE_GENERATOR} -DCC=${CMAKE_C_COMPILER}
           -P ${CMAKE_SOURCE_DIR}/tests/install/install_test.cmake)
  set_tests_properties(install_tree PROPERTIES LABELS install TIMEOUT 1200)
  if(TARGET test_layers)
    add_dependencies(test_layers anvil_rt_public)
    target_compile_definitions(test_layers PRIVATE
      ANVIL_PUBLIC_RT="$<TARGET_FILE:anvil_rt_public>" ANVIL_CC="${CMAKE_C_COMPILER}")
  endif()
endif()
