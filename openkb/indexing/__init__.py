"""Indexing: the Milvus collection layer (schema, functions, rows, scope filter, search, aliases)."""
