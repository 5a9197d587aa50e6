# One `cmake --build` is always enough after an RTL edit (issue 32 item 14): a scratch copy of
# verilate_rebuild/ (a tiny model built with the project's tpu_verilate()) is configured and
# built, then edited three times (edit 1 adds signals and a module, edit 2 removes signals, edit 3
# reverts both), each followed by exactly one build that must succeed and a run of the model
# that must show the edit's behaviour. Each edit changes the set of C++ files Verilator writes.
#   cmake -DSRC=<verilate_rebuild dir> -DWORK=<scratch dir> -DMODULE=<TpuVerilate.cmake>
#         [-DGENERATOR=<cmake generator>] [-DLAUNCHER=<ccache>]
#         [-DVCFLAGS=<VERILATOR_CFLAGS> -DVMTFLAGS=<VERILATOR_MT_CFLAGS>, comma-separated]
#         -P verilate_rebuild.cmake
cmake_minimum_required(VERSION 3.22)
foreach(v SRC WORK MODULE)
  if(NOT ${v})
    message(FATAL_ERROR "verilate_rebuild: -D${v}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
set(ENV{CCACHE_BASEDIR} "${WORK}")  # ccache hits whatever the scratch directory
file(MAKE_DIRECTORY "${WORK}/src/rtl")
# Copies by reading and writing, so that the copy is newer than every earlier build output
# (file(COPY) would keep the source's time stamp).
function(put from to)
  file(READ "${SRC}/${from}" text)
  file(WRITE "${WORK}/src/${to}" "${text}")
endfunction()
put(CMakeLists.txt CMakeLists.txt)
put(main.cc main.cc)
put(rtl/vr_top.sv rtl/vr_top.sv)
put(rtl/vr_sub.sv rtl/vr_sub.sv)

set(gen "")
if(GENERATOR)
  set(gen -G "${GENERATOR}")
endif()
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
# The parent's results of verilator-config's compiler checks (comma-separated), so that the
# scratch configure skips its twenty try_compiles.
set(vflags "")
if(DEFINED VCFLAGS AND DEFINED VMTFLAGS)
  string(REPLACE "," ";" VCFLAGS "${VCFLAGS}")
  string(REPLACE "," ";" VMTFLAGS "${VMTFLAGS}")
  file(WRITE "${WORK}/init.cmake" "set(VERILATOR_CFLAGS \"${VCFLAGS}\" CACHE STRING \"\")\n"
             "set(VERILATOR_MT_CFLAGS \"${VMTFLAGS}\" CACHE STRING \"\")\n")
  set(vflags -C "${WORK}/init.cmake")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK}/src" -B "${WORK}/build" ${gen} ${launcher}
                        ${vflags}
                        -DCMAKE_BUILD_TYPE=Release -DTPU_VERILATE_MODULE=${MODULE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "verilate_rebuild: configure failed:\n${out}")
endif()

# Exactly one build, which must succeed; then the model must print `expect`.
function(build_and_run step expect)
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build" -j 2
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "verilate_rebuild: ${step}: the one build failed:\n${out}")
  endif()
  execute_process(COMMAND "${WORK}/build/vr_main" RESULT_VARIABLE rc OUTPUT_VARIABLE got
                  ERROR_VARIABLE err)
  string(STRIP "${got}" got)
  if(rc OR NOT got STREQUAL expect)
    message(FATAL_ERROR "verilate_rebuild: ${step}: the model printed '${got}' (rc ${rc}), "
                        "expected '${expect}'\n${err}")
  endif()
  message(STATUS "verilate_rebuild: ${step}: one build, ${got}")
endfunction()

build_and_run("first build" "y=102 z=0")
put(edits/vr_top_add.sv rtl/vr_top.sv)      # edit 1: adds signals and a module (new files)
put(edits/vr_acc.sv rtl/vr_acc.sv)
build_and_run("edit 1 (adds)" "y=102 z=28")
put(edits/vr_sub_remove.sv rtl/vr_sub.sv)  # edit 2: removes signals (a file less)
build_and_run("edit 2 (removes)" "y=2 z=28")
put(rtl/vr_top.sv rtl/vr_top.sv)           # edit 3: back to the start
put(rtl/vr_sub.sv rtl/vr_sub.sv)
file(REMOVE "${WORK}/src/rtl/vr_acc.sv")
build_and_run("edit 3 (reverts)" "y=102 z=0")
