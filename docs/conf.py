"""Sphinx configuration of ppack's documentation site.

Build (README): python -m sphinx -W -n --keep-going -b html docs docs/_build/html
Nothing is fetched from the network: no intersphinx, no remote images.
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # cli_reference, api_checks: this site's own extensions
sys.path.insert(0, str(HERE.parent))  # ppack from this checkout when it is not installed

import ppack  # noqa: E402

project = "ppack"
author = "the ppack authors"
copyright = "the ppack authors"
release = version = ppack.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "pydata_sphinx_theme",
    "cli_reference",
    "api_checks",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json"]
templates_path = ["_templates"]
nitpicky = True  # every cross-reference must resolve (the build's -n says so too)

# -- API reference: autosummary pages, numpydoc sections, checked -------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the types are in the numpydoc Parameters and Returns sections
autodoc_member_order = "bysource"
# the public methods shown on each class page (the others are the trainers' internals)
API_METHODS = {
    "PackSVC": ["fit", "predict", "decision_function", "predict_proba", "score", "decision_function_shard",
                "save", "load"],
    "PackSVR": ["fit", "predict", "score", "decision_function_shard", "save", "load"],
    "PackOneClassSVM": ["fit", "predict", "decision_function", "score_samples", "fit_predict",
                        "decision_function_shard", "save", "load"],
    "BlockAveragedSVC": ["fit", "predict", "decision_function", "score", "decision_function_shard", "save", "load"],
    "Shard": ["from_arrays"],
}
autosummary_context = {"api_methods": API_METHODS}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# numpydoc's validation of every documented object: a docstring, every parameter documented
# (and none that is not one) with a description, a Returns section; api_checks adds that each
# public name (not each method) shows an Examples section.
numpydoc_validation_checks = {"GL08", "PR01", "PR02", "PR07", "RT01"}

# -- Markdown pages ------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# -- the gallery: examples/plot_*.py run at build time, in this process ---------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "write_computation_times": False,
    "remove_config_comments": True,
    "show_memory": False,
}

# -- HTML ----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"ppack {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
html_show_sourcelink = False

# Without intersphinx (no network), references to other projects' objects cannot resolve:
# they are shown as plain names instead of failing the nitpicky build.
nitpick_ignore_regex = [(r"py:.*", r"(numpy|scipy|sklearn|mpi4py|h5py|matplotlib)(\..*)?")]
