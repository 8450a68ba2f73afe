"""Series of binlog files: the answers over one server's files, per flavor."""
