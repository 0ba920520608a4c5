# The install test (ctest -R install_tree, label `install`): installs the build into a scratch
# prefix, compiles a fixture with the installed CLI, builds examples/ against the installed tree
# as a separate CMake project (find_package(anvil)) and with pkg-config, runs them, and checks the
# outputs against PyTorch's (the fixture's .npy). With dpkg-deb and dpkg-shlibdeps present it also
# packs the Debian package and checks its contents.
#
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DGENERATOR=... -DCC=... [-DWORK_DIR=...] -P install_test.cmake
#
# Everything happens in WORK_DIR (default: a fresh folder under $TMPDIR or /tmp, outside the
# source and build trees), removed at the end when the test passes.
foreach(v BUILD_DIR SOURCE_DIR GENERATOR CC)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED WORK_DIR)
  set(tmp /tmp)
  if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
    set(tmp $ENV{TMPDIR})
  endif()
  string(RANDOM LENGTH 10 tag)
  set(WORK_DIR ${tmp}/anvil_install_test_${tag})
endif()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# run(NAME OUT_VAR cmd...): runs a command, fails the test with its output when it fails.
function(run name out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (exit ${rc}): ${ARGN}\n--- stdout\n${o}\n--- stderr\n${e}")
  endif()
  set(${out} "${o}${e}" PARENT_SCOPE)
endfunction()

# expect(TEXT PART...): every PART occurs in TEXT.
function(expect what text)
  foreach(part IN LISTS ARGN)
    string(FIND "${text}" "${part}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${what}: expected \"${part}\" in:\n${text}")
    endif()
  endforeach()
endfunction()

# 1. Install.
run("cmake --install" out ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f bin/anvil bin/anvil-gemm-time lib/libanvil_rt.so lib/libanvil_rt.so.0
          include/anvil/anvil.h include/anvil/anvil_c.h include/anvil/anvil_rt.h
          lib/cmake/anvil/anvilConfig.cmake lib/cmake/anvil/anvilConfigVersion.cmake
          lib/cmake/anvil/anvilTargets.cmake lib/pkgconfig/anvil.pc lib/anvil/libanvil_rt.so
          lib/anvil/libanvil_core.so lib/anvil/libanvil_dist.so)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${prefix}/${f}")
  endif()
endforeach()
# The public headers include nothing from src/ (only <...> headers and "anvil/..." ones).
file(GLOB headers ${prefix}/include/anvil/*.h)
foreach(h IN LISTS headers)
  file(STRINGS ${h} incs REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS incs)
    if(NOT line MATCHES "#[ \t]*include[ \t]*<" AND NOT line MATCHES "\"anvil/")
      message(FATAL_ERROR "${h}: a public header includes a private one: ${line}")
    endif()
  endforeach()
endforeach()

# 2. The installed CLI compiles a fixture (generated code against the installed headers).
set(fixtures ${SOURCE_DIR}/tests/fixtures)
set(pkg ${WORK_DIR}/mlp_small.anvil)
run("installed anvil compile" out ${CMAKE_COMMAND} -E env --unset=ANVIL_INCLUDE_DIR
    ANVIL_CACHE_DIR=${WORK_DIR}/cache ${prefix}/bin/anvil compile ${fixtures}/mlp_small.pt2
    -o ${pkg} -q)

# ... and with the headers installed beside it, not the source tree's: a sentinel planted in the
# installed anvil_rt.h must break a compile (a fresh cache, so nothing is reused).
file(READ ${prefix}/include/anvil/anvil_rt.h rt_header)
file(APPEND ${prefix}/include/anvil/anvil_rt.h "\n#error anvil_install_test_sentinel\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ANVIL_INCLUDE_DIR
                ANVIL_CACHE_DIR=${WORK_DIR}/cache_sentinel ${prefix}/bin/anvil compile
                ${fixtures}/mlp_small.pt2 -o ${WORK_DIR}/sentinel.anvil -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
file(WRITE ${prefix}/include/anvil/anvil_rt.h "${rt_header}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the installed CLI compiled without the installed headers:\n${o}${e}")
endif()
expect("the installed CLI's compile error" "${o}${e}" "anvil_install_test_sentinel")

# 3. examples/ as a project of its own, copied outside the source tree, against the installed
# tree.
file(MAKE_DIRECTORY ${WORK_DIR}/examples_src)
file(COPY ${SOURCE_DIR}/examples/CMakeLists.txt ${SOURCE_DIR}/examples/embed_c.c
          ${SOURCE_DIR}/examples/embed_cpp.cpp DESTINATION ${WORK_DIR}/examples_src)
run("configure examples" out ${CMAKE_COMMAND} -S ${WORK_DIR}/examples_src -B ${WORK_DIR}/examples
    -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run("build examples" out ${CMAKE_COMMAND} --build ${WORK_DIR}/examples)
# It linked the installed library, not the build's.
file(READ ${WORK_DIR}/examples/CMakeCache.txt cache)
expect("examples' anvil_DIR" "${cache}" "anvil_DIR:PATH=${prefix}/lib/cmake/anvil")
run("ldd embed_cpp" ldd ldd ${WORK_DIR}/examples/embed_cpp)
expect("embed_cpp's libraries" "${ldd}" "libanvil_rt.so.0 => ${prefix}/lib/libanvil_rt.so.0")
string(FIND "${ldd}" "libanvil_core" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "embed_cpp needs more than libanvil_rt:\n${ldd}")
endif()

# 4. Run the C++ example on the fixture's input; its outputs must match PyTorch's.
run("embed_cpp" out ${WORK_DIR}/examples/embed_cpp ${pkg} ${fixtures}/mlp_small.in0.npy
    --want ${fixtures}/mlp_small.out0.npy)
expect("embed_cpp output" "${out}" "input x [8, 256]" "output 0: [8, 256]" "output 0: match")
message(STATUS "embed_cpp:\n${out}")
# A bad input is anvil's error, through the C++ API, and a failure exit.
execute_process(COMMAND ${WORK_DIR}/examples/embed_cpp ${pkg} ${fixtures}/small_cnn.in0.npy
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0)
  message(FATAL_ERROR "embed_cpp accepted a wrong input:\n${o}${e}")
endif()
expect("embed_cpp's error" "${e}" "error: " "input 'x' (#0): wrong number of dims")

# A CUDA package (where the CUDA backend was built and nvcc is found): the public library loads
# the installed libanvil_cuda.so for it. Without a GPU that load ends in the backend's own "no
# cuda device" error; on a GPU the model loads and the example's host input is refused.
if(EXISTS ${BUILD_DIR}/lib/libanvil_cuda.so)
  if(NOT EXISTS ${prefix}/lib/libanvil_cuda.so)
    message(FATAL_ERROR "the CUDA backend was built but not installed as ${prefix}/lib/libanvil_cuda.so")
  endif()
  find_program(NVCC nvcc HINTS /usr/local/cuda/bin)
endif()
if(EXISTS ${BUILD_DIR}/lib/libanvil_cuda.so AND NVCC)
  run("installed anvil compile --target cuda-sm90" out ${CMAKE_COMMAND} -E env
      ANVIL_CACHE_DIR=${WORK_DIR}/cache ${prefix}/bin/anvil compile ${fixtures}/mlp_small.pt2
      --target cuda-sm90 -o ${WORK_DIR}/mlp_gpu.anvil -q)
  execute_process(COMMAND ${WORK_DIR}/examples/embed_cpp ${WORK_DIR}/mlp_gpu.anvil
                  ${fixtures}/mlp_small.in0.npy --device cuda
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(rc EQUAL 0 OR NOT ("${e}" MATCHES "no cuda device is available" OR
                        "${e}" MATCHES "input is on the wrong device"))
    message(FATAL_ERROR "a CUDA package through the installed libanvil_rt: expected the CUDA "
            "backend to load (then no GPU, or a host input refused), got exit ${rc}:\n${o}${e}")
  endif()
  message(STATUS "CUDA package through the installed library: ${e}")
endif()

# 5. The C example, built with pkg-config alone, runs the package.
run("pkg-config" flags ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/lib/pkgconfig
    pkg-config --cflags --libs anvil)
string(STRIP "${flags}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
expect("pkg-config flags" "${flags}" "-I${prefix}/lib/pkgconfig/../../include"
       "-L${prefix}/lib/pkgconfig/../../lib" "-lanvil_rt")
run("cc embed_c.c" out ${CC} ${WORK_DIR}/examples_src/embed_c.c ${flags} -o ${WORK_DIR}/embed_c_pc)
run("embed_c" out ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${WORK_DIR}/embed_c_pc
    ${pkg})
expect("embed_c output" "${out}" "input 0: x dtype(code=2 bits=32) [8, 256]" "run 2:"
       "output 0: [8, 256]")

# 6. The Debian package (where dpkg-deb exists): built, and holding the same tree under /usr.
find_program(DPKG_DEB dpkg-deb)
find_program(DPKG_SHLIBDEPS dpkg-shlibdeps)  # dpkg-dev (build-essential has it)
get_filename_component(cmake_bin ${CMAKE_COMMAND} DIRECTORY)
if(DPKG_DEB AND DPKG_SHLIBDEPS)
  run("cpack -G DEB" out ${cmake_bin}/cpack -G DEB --config ${BUILD_DIR}/CPackConfig.cmake
      -B ${WORK_DIR}/deb)
  file(GLOB debs ${WORK_DIR}/deb/*.deb)
  list(LENGTH debs n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "cpack made ${n} .deb files: ${debs}\n${out}")
  endif()
  run("dpkg-deb -c" listing ${DPKG_DEB} -c ${debs})
  expect("the .deb's files" "${listing}" "./usr/bin/anvil" "./usr/lib/libanvil_rt.so.0.1.0"
         "./usr/include/anvil/anvil.h" "./usr/lib/cmake/anvil/anvilConfig.cmake"
         "./usr/lib/pkgconfig/anvil.pc" "./usr/lib/anvil/libanvil_core.so")
  run("dpkg-deb -f" fields ${DPKG_DEB} -f ${debs} Package Version Depends)
  expect("the .deb's control fields" "${fields}" "Package: anvil" "Depends:" "libzip")
  message(STATUS "Debian package ${debs}:\n${fields}")
else()
  message(STATUS "dpkg-deb or dpkg-shlibdeps not found: the Debian package is not checked")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
