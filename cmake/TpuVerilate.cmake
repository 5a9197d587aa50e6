# tpu_verilate(): Verilator's own verilate() (same arguments), made safe for RTL edits, so that
# one `cmake --build` is always enough after any RTL change (issue 11 item 9, issue 32 item 14).
# Shared by the project (CMakeLists.txt) and by the test that edits RTL in a scratch project
# (tests/system/verilate_rebuild), so both run the very same code.
#
# Why verilate() alone is not enough: it learns which C++ files Verilator generates when CMake
# configures (it runs Verilator then, and includes the file list V<prefix>.cmake that Verilator
# writes), and the target compiles that list. The build re-runs Verilator when the RTL changes,
# but an RTL change can change the set of files (a module more or less, Verilator's hashed
# `__DepSet_h<hash>__<n>` file names, a split of a big function into more files), and Verilator
# never deletes a file it no longer generates. So the first build after such an edit compiles the
# list of the previous configure: a listed file left over from the old run names members the new
# headers no longer have (compile error), or a function now lives in a file the list lacks
# (undefined reference). verilate()'s own remedy, copying the new list to V<prefix>_copy.cmake,
# which CMake includes, only re-configures on the *next* build.
#
# What tpu_verilate() adds: the same build rule that runs Verilator then runs
# tpu_verilate_sync.cmake, which compares this run's list with the one the build system compiles
# (tpu_listed_<prefix>.txt, written here at configure time) and
#   - makes every listed file that this run did not generate an empty stub (an empty object), and
#   - #includes every generated file that is not listed from tpu_extra_<prefix>.cpp, one more
#     source of fixed name that the target always compiles (empty when the lists agree).
# So the objects always follow what Verilator generated, in the same build. Each generated file
# still compiles on its own (parallel, one ccache entry per file); only files that appeared since
# the last configure share the extra unit, until verilate() re-configures on the next build.
# RTL files need not be configure dependencies (an RTL edit re-runs Verilator in the build, for
# the models that read the file, in parallel), and Verilator runs at configure time only when
# verilate() wants it (first configure, or a changed command line).

set(_TPU_VERILATE_SYNC "${CMAKE_CURRENT_LIST_DIR}/tpu_verilate_sync.cmake")

function(tpu_verilate target)
  # verilate()'s own keywords, all of them: a parser that knows only some reads `DIRECTORY d
  # TRACE_FST` as the directory "TRACE_FST" (the old tpu_verilate() did, and so never saw that
  # the RTL of vchip, vici or the MXU models had changed; issue 32 item 14).
  cmake_parse_arguments(_tv "COVERAGE;TRACE;TRACE_FST;SYSTEMC;TRACE_STRUCTS"
                        "PREFIX;TOP_MODULE;THREADS;TRACE_THREADS;DIRECTORY"
                        "SOURCES;VERILATOR_ARGS;INCLUDE_DIRS;OPT_SLOW;OPT_FAST;OPT_GLOBAL" ${ARGN})
  set(prefix "${_tv_PREFIX}")
  if(NOT prefix)  # verilate()'s default: V and the first source's name
    list(GET _tv_SOURCES 0 first_src)
    get_filename_component(first_src "${first_src}" NAME_WE)
    set(prefix "V${first_src}")
  endif()
  set(vdir "${_tv_DIRECTORY}")
  if(NOT vdir)  # verilate()'s default
    get_target_property(bdir ${target} BINARY_DIR)
    get_target_property(tname ${target} NAME)
    set(vdir "${bdir}/CMakeFiles/${tname}.dir/${prefix}.dir")
  endif()

  # An RTL file this model read was deleted or renamed: the build's Verilator rule would still
  # depend on it (make: "No rule to make target"), so Verilator runs now, at configure time,
  # and verilate() learns the new list. (The globs further down re-run the configure step when
  # a file is added to or deleted from a directory the model reads; an edit needs no configure.)
  set(copy_file "${vdir}/${prefix}_copy.cmake")
  if(EXISTS "${copy_file}")
    set(${prefix}_DEPS "")
    include("${copy_file}")
    foreach(dep IN LISTS ${prefix}_DEPS)
      get_filename_component(dep "${dep}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      if(NOT EXISTS "${dep}")
        file(REMOVE "${vdir}/verilator_args.txt")  # verilate() then runs Verilator now
        break()
      endif()
    endforeach()
  endif()

  # TPU_RTL_DIR on the include path when set: every RTL file includes tpu_assert.svh.
  set(incs "")
  if(TPU_RTL_DIR)
    set(incs INCLUDE_DIRS ${TPU_RTL_DIR})
  endif()
  verilate(${target} ${ARGN} ${incs})

  # The list verilate() just gave the target (it included the same file), and the first output
  # of its Verilator rule (the sources in the order verilate() names them).
  include("${vdir}/${prefix}_copy.cmake")
  set(listed ${${prefix}_CLASSES_FAST} ${${prefix}_CLASSES_SLOW} ${${prefix}_SUPPORT_FAST}
             ${${prefix}_SUPPORT_SLOW})
  if(NOT listed)
    message(FATAL_ERROR "tpu_verilate(${target}): no generated C++ in ${vdir}/${prefix}_copy.cmake")
  endif()
  list(GET listed 0 first_out)
  set(dirs "")
  foreach(dep IN LISTS ${prefix}_DEPS)
    if(NOT dep STREQUAL VERILATOR_BIN)
      get_filename_component(dep "${dep}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      get_filename_component(dir "${dep}" DIRECTORY)
      list(APPEND dirs "${dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  foreach(dir IN LISTS dirs)
    file(GLOB unused CONFIGURE_DEPENDS "${dir}/*.sv" "${dir}/*.svh" "${dir}/*.v" "${dir}/*.vh"
         "${dir}/*.vlt")
  endforeach()

  # The listed set, for the sync step; rewritten only when it changes. (The names of this file
  # and the extra unit do not start with the prefix: Verilator deletes <prefix>*.txt when it runs.)
  string(REPLACE ";" "\n" text "${listed}")
  set(listed_file "${vdir}/tpu_listed_${prefix}.txt")
  set(old "")
  if(EXISTS "${listed_file}")
    file(READ "${listed_file}" old)
  endif()
  if(NOT old STREQUAL "${text}\n")
    file(WRITE "${listed_file}" "${text}\n")
  endif()
  # Bring stubs and the extra unit in line now too: a build that ran Verilator and then failed
  # may have left files that differ from this list.
  execute_process(COMMAND ${CMAKE_COMMAND} -DPREFIX=${prefix} -DVDIR=${vdir}
                          -P ${_TPU_VERILATE_SYNC}
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "tpu_verilate(${target}): ${_TPU_VERILATE_SYNC} failed")
  endif()

  # After every Verilator run of the build, in the same rule (nothing compiles in between).
  add_custom_command(OUTPUT "${first_out}" APPEND
    COMMAND ${CMAKE_COMMAND} -DPREFIX=${prefix} -DVDIR=${vdir} -P ${_TPU_VERILATE_SYNC}
    DEPENDS ${_TPU_VERILATE_SYNC})
  set(extra "${vdir}/tpu_extra_${prefix}.cpp")
  target_sources(${target} PRIVATE "${extra}")
  # Compiled after that rule, with the flags verilate() gives generated code (-CFLAGS; the
  # project passes no OPT_FAST/OPT_SLOW, which verilate() would add per file).
  set_source_files_properties("${extra}" PROPERTIES OBJECT_DEPENDS "${first_out}")
  foreach(flag ${${prefix}_USER_CFLAGS})
    set_property(SOURCE "${extra}" APPEND_STRING PROPERTY COMPILE_FLAGS " ${flag}")
  endforeach()
endfunction()
