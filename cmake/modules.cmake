# One library target per folder, with enforced dependency boundaries.
#
# Sources include headers from the repository root ("lib/kv/block_table.h"), but a
# target never sees the root itself: each module gets a private include tree under
# ${CMAKE_BINARY_DIR}/modinc/<target>/ holding symlinks to its own folder and to the
# folders of its allowed dependencies (transitively). Including a header from a
# module that DESIGN.md section 2 does not allow is therefore a compile error
# ("No such file or directory"), which tests/boundary checks.

function(cb_stage_includes target)
  set(inc "${CMAKE_BINARY_DIR}/modinc/${target}")
  foreach(d IN LISTS ARGN)
    get_filename_component(parent "${inc}/${d}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    if(IS_SYMLINK "${inc}/${d}" OR EXISTS "${inc}/${d}")
      file(REMOVE "${inc}/${d}")
    endif()
    file(CREATE_LINK "${CMAKE_SOURCE_DIR}/${d}" "${inc}/${d}" SYMBOLIC)
  endforeach()
  set(CB_STAGED_INCLUDE "${inc}" PARENT_SCOPE)
endfunction()

# cb_module(<target> DIR <folder> [SOURCES ...] [DEPS <cb targets>...] [LIBS <external>...])
function(cb_module target)
  cmake_parse_arguments(M "" "DIR" "SOURCES;DEPS;LIBS;PRIVATE_LIBS" ${ARGN})
  set(dirs "${M_DIR}")
  foreach(dep IN LISTS M_DEPS)
    get_property(dep_dirs TARGET ${dep} PROPERTY CB_ALLOWED_DIRS)
    list(APPEND dirs ${dep_dirs})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  cb_stage_includes(${target} ${dirs})
  if(M_SOURCES)
    add_library(${target} STATIC ${M_SOURCES})
    set(scope PUBLIC)
    cb_target_flags(${target})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  set_property(TARGET ${target} PROPERTY CB_ALLOWED_DIRS "${dirs}")
  target_include_directories(${target} ${scope} "${CB_STAGED_INCLUDE}"
                             ${scope} "${CMAKE_BINARY_DIR}/generated")
  target_link_libraries(${target} ${scope} ${M_DEPS} ${M_LIBS})
  if(M_PRIVATE_LIBS)
    target_link_libraries(${target} PRIVATE ${M_PRIVATE_LIBS})
  endif()
endfunction()

# cb_target_flags(<target>): warnings (errors unless CACHEBENCH_WERROR=OFF).
function(cb_target_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CACHEBENCH_WERROR}>>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${CACHEBENCH_WERROR}>>:-Werror=all-warnings>)
endfunction()

# cb_glob_sources(<var> [extra globs]): the folder's *.cc (and *.cu when CUDA is on).
function(cb_glob_sources var)
  file(GLOB srcs CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cc")
  if(CB_HAVE_CUDA)
    file(GLOB cu CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cu")
    list(APPEND srcs ${cu})
  endif()
  list(SORT srcs)
  set(${var} ${srcs} PARENT_SCOPE)
endfunction()
