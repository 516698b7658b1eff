"""Helpers shared across test folders: plain functions and constants, no fixtures.

Test modules import these; they never import another test module or a conftest
of another folder (fixtures live in conftest.py files where pytest finds them).
"""
