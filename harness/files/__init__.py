"""Files, handled safely: `atomic` (crash-safe writes: a reader sees the old file or the whole new
one) and `regular_file` (reading a file someone else named: a regular file only, bounded in size).
"""
