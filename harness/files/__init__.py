"""Files, handled safely: `atomic` (crash-safe writes: a reader sees the old file or the whole new
one), `dirlock` (an exclusive lock on a folder that dies with its holder) and `regular_file`
(reading a file someone else named: a regular file only, bounded in size).
"""
