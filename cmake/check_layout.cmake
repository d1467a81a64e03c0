# check_layout.cmake: the layering of the source folders, checked on every
# build (the lmcc_check_layout target runs `cmake -DROOT=<source> -P` on this
# file). Each folder may include its own headers and those of the folders
# listed for it, which lie below it; the CAF-free folders may not include CAF.
# docs/code-layout.md explains the layers.
#
#   cmake -DROOT=/path/to/lmcc -P cmake/check_layout.cmake
cmake_minimum_required(VERSION 3.25)

set(_ours faults clock messages persistence cluster index registry gateway actors apps)

set(_may_include_faults "")
set(_may_include_clock faults)
set(_may_include_messages faults)
set(_may_include_persistence messages clock faults)
set(_may_include_cluster messages clock faults)
set(_may_include_index messages persistence cluster clock faults)
set(_may_include_registry messages persistence cluster index clock faults)
set(_may_include_gateway messages clock faults)
# actors/ and actors/cluster/ are one layer; the TLS transport beneath the
# cluster port reads the node's certificates through gateway/node_tls.hpp.
set(_may_include_actors messages persistence cluster index registry clock faults
    gateway/node_tls.hpp)
set(_caf_free faults clock messages persistence cluster index registry gateway)

if(NOT ROOT)
  message(FATAL_ERROR "check_layout.cmake: pass -DROOT=<the source folder>")
endif()

set(_violations "")
foreach(folder faults clock messages persistence cluster index registry gateway actors)
  file(GLOB_RECURSE _files RELATIVE "${ROOT}" "${ROOT}/${folder}/*.hpp" "${ROOT}/${folder}/*.cpp")
  foreach(file ${_files})
    file(STRINGS "${ROOT}/${file}" _includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line ${_includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*$" "\\1" path "${line}")
      if(folder IN_LIST _caf_free AND path MATCHES "^caf/")
        list(APPEND _violations "${file} includes <${path}>: ${folder}/ is CAF-free")
        continue()
      endif()
      if(NOT line MATCHES "\"" OR NOT path MATCHES "/")
        continue()
      endif()
      string(REGEX REPLACE "/.*$" "" top "${path}")
      if(NOT top IN_LIST _ours OR top STREQUAL folder)
        continue()
      endif()
      if(top IN_LIST _may_include_${folder} OR path IN_LIST _may_include_${folder})
        continue()
      endif()
      set(_allowed "")
      foreach(below ${_may_include_${folder}})
        if(NOT below MATCHES "\\.hpp$")
          string(APPEND below "/")
        endif()
        list(APPEND _allowed "${below}")
      endforeach()
      string(REPLACE ";" ", " _allowed "${_allowed}")
      list(APPEND _violations
           "${file} includes \"${path}\": ${folder}/ may include only ${_allowed} (and its own)")
    endforeach()
  endforeach()
endforeach()

if(_violations)
  list(LENGTH _violations _count)
  string(REPLACE ";" "\n  " _list "${_violations}")
  message(FATAL_ERROR "${_count} include(s) break the folder layering (cmake/check_layout.cmake):\n  ${_list}")
endif()
