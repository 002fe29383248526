"""Statistics, pure Python (no numpy or scipy, so the parent and the readers use them as the worker
does): `summary` (a timing's percentiles, median, CV, the Mann-Whitney U test, geometric means),
`intervals` (confidence intervals for medians and paired speedups, and the fusion verdict they
support) and `thresholds` (the limits by which a worker judges its own figures and `validate`
judges them again).
"""
