"""Writing: index versions, ingest, reading the caller's documents, changes and write blocks, re-embedding."""
