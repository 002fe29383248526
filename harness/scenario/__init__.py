"""What a scenario file says and what it expands to. `schema` is the checked YAML format (pydantic
models, exported as scenarios/scenario.schema.json): the file's top level, its model and backend
entries in `specs`, its sections on how cells are measured in `settings`, and the base and
shorthands they share in `format_base`; `loading` reads a file with line numbers for
every error and checks each backend's options; `rules` is the one table of MLPerf scenario rules
(batch, metric, LoadGen settings, wording); `cells` expands a scenario into its cells.
Nothing here imports torch.
"""
