"""cmake/check_layout.cmake: the folder layering the build checks.

The real tree passes; a tree with an include that points up a layer, or CAF in
a CAF-free folder, fails and names the file, the include and the rule.
"""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "cmake" / "check_layout.cmake"


def run_check(root):
    return subprocess.run(["cmake", f"-DROOT={root}", "-P", str(CHECK)],
                          capture_output=True, text=True, check=False)


def test_the_tree_keeps_its_layers():
    result = run_check(ROOT)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def tree(tmp_path):
    """A copy of the product folders, to break on purpose."""
    for folder in ("faults", "clock", "messages", "persistence", "cluster", "index", "registry",
                   "gateway", "actors"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def refusal(tree, file, include):
    """Adds `include` to `file` of the tree and returns the check's complaint."""
    with (tree / file).open("a") as f:
        f.write(include + "\n")
    result = run_check(tree)
    assert result.returncode != 0, f"{file} with {include} passed"
    return result.stderr


def test_an_include_from_a_layer_above_fails_and_says_which(tree):
    said = refusal(tree, "index/kv_index.hpp", '#include "registry/registry.hpp"')
    assert 'index/kv_index.hpp includes "registry/registry.hpp"' in said
    assert "index/ may include only messages/, persistence/, cluster/, clock/, faults/" in said


def test_caf_in_a_caf_free_folder_fails(tree):
    said = refusal(tree, "registry/probe.cpp", "#include <caf/all.hpp>")
    assert "registry/probe.cpp includes <caf/all.hpp>: registry/ is CAF-free" in said


def test_the_clock_includes_nothing_but_faults(tree):
    said = refusal(tree, "clock/clock.hpp", '#include "messages/limits.hpp"')
    assert 'clock/clock.hpp includes "messages/limits.hpp": clock/ may include only faults/' in said


def test_the_gateway_reaches_no_actor(tree):
    said = refusal(tree, "gateway/probe.hpp", '#include "actors/type_ids.hpp"')
    assert 'gateway/probe.hpp includes "actors/type_ids.hpp"' in said


def test_actors_may_read_the_node_tls_but_nothing_else_of_the_gateway(tree):
    (tree / "actors" / "probe.hpp").write_text('#include "gateway/node_tls.hpp"\n')
    assert run_check(tree).returncode == 0
    said = refusal(tree, "actors/probe.hpp", '#include "gateway/http_api.hpp"')
    assert 'actors/probe.hpp includes "gateway/http_api.hpp"' in said
