"""pytest setup: import ndstore from a build tree (NDS_BUILD, default build/ at the repository root):
<NDS_BUILD>/python holds the package (python/CMakeLists.txt)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NDS_BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
PYDIR = os.path.join(BUILD, "python")
if not os.path.isdir(os.path.join(PYDIR, "ndstore")):
    raise RuntimeError("no ndstore package in %s: build it (cmake --build %s --target ndstore_python) or set "
                       "NDS_BUILD" % (PYDIR, BUILD))
sys.path.insert(0, PYDIR)


@pytest.fixture
def url(tmp_path):
    """A factory of file:// array URLs in a fresh directory: url("a", "zarr3")."""
    def make(name="a", fmt="zarr"):
        return "file://%s/%s" % (tmp_path, name) + ("|%s:" % fmt if fmt else "")
    return make
