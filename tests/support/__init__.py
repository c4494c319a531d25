"""The test toolkit: what more than one test module uses (tests/README.md has the map).

Test modules import from here, never from one another; tests/conftest.py wraps these in
fixtures (``fake_node``, ``fake_nodes``, ``pki``, ``promtool``, ``prometheus``, ``clock``).
"""
