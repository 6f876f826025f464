"""Dify External Knowledge adapter (docs/dify.md): app-key-bound retrieval.

A Dify app authenticates with an ``okdify_...`` key that an administrator granted a list of
knowledge bases; it never acts as a user. ``keys`` and ``mappings`` are the admin-side services
(CLI and ``/api/admin/dify``), ``conditions`` is the pure ``metadata_condition`` evaluator, and
``service`` answers ``POST /retrieval`` through the one retrieval service and its PostgreSQL
final check.
"""
