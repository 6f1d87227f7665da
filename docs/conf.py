"""Sphinx configuration of the vckattn documentation site (``make docs``: HTML in build/docs/, warnings are
errors). The chapters are the Markdown pages of this folder (MyST); the API reference is generated from the
package's docstrings (autodoc + autosummary, Google-style sections through napoleon)."""

from __future__ import annotations

import shutil
from pathlib import Path

import vckattn

# the API pages are generated on every build: pages of modules that no longer exist must not survive
shutil.rmtree(Path(__file__).parent / "api" / "_generated", ignore_errors=True)

project = "vckattn"
author = "the vckattn authors"
release = vckattn.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon",
              "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "api/_generated/*.tmp"]
html_theme = "alabaster"
html_title = "vckattn"
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # a dataclass's "Attributes:" section, not a second description of each field
templates_path = ["_templates"]  # a module page: its members, then its submodules
myst_heading_anchors = 3
# Links from these pages to files of the repository outside docs/ (README.md, hw/ENGINE.md, sources) are
# checked by tests/test_docs.py; Sphinx cannot resolve them as pages of the site.
# A type named in a docstring ("bytes", "cols") may match several attributes of the package: Sphinx then links
# none of them (ref.python), which is not a fault of the page.
suppress_warnings = ["myst.xref_missing", "ref.python"]
