"""MLPerf Inference's own rules, as data and small pure functions: which MLPerf benchmark a model
stands for, the user.conf a cell's LoadGen run reads beside LoadGen's built-in mlperf.conf, scoring
an accuracy log as MLPerf's ImageNet script does, and the compliance tests' audit settings and
verification. No torch, no LoadGen: the worker (harness/measure/) drives LoadGen with these, and
`pack` (harness/reporting/pack.py) lays out a submission tree from them."""
