"""Reading bundles for people: `view` turns a bundle into the rows and analyses a report shows,
`markdown` and `html` render them (with `plots`), `compare` sets two bundles side by side, and
`pack` writes a bundle as an MLPerf-style submission tree. Reads bundles only through
harness.bundle; never runs a model.
"""
