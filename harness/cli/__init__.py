"""The `fusionbench` command: `main` parses arguments and maps errors to exit codes,
`bundle_commands` holds validate, compare, report, findings and pack. `python -m harness.cli` runs it.
"""
