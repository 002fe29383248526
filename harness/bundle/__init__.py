"""The result bundle on disk: `writer` creates and fills one (atomic writes, checksums in
`manifest`), `reader` opens one safely (`safe_json`: size and depth limits, no symlinks) and
brings old versions forward (`migrations`), `cell_record` and `header_record` are a cell's and
bundle.json's typed records (a cell's metrics in parts: `timing_record`, `loadgen_record`,
`passes_record`, on `record_base`), `schema` is the JSON schema a bundle obeys (`early_schemas`
the first three versions', `schema_check` checks a record against one), `loadgen_log` parses the
LoadGen logs a cell keeps, and `validate` checks a bundle end to end.
Nothing here imports torch.
"""
