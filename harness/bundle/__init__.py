"""The result bundle on disk: `writer` creates and fills one (atomic writes, checksums in
`manifest`), `reader` opens one safely (`safe_json`: size and depth limits, no symlinks) and
brings old versions forward (`migrations`), `schema` is the JSON schema a bundle obeys,
`loadgen_log` parses the LoadGen logs a cell keeps, and `validate` checks a bundle end to end.
Nothing here imports torch.
"""
