"""Binlog files: framing and walking (MariaDB, MySQL), and probing an offset."""
