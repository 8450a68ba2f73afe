"""Index files: the byte format, reading, writing, metadata and building."""
