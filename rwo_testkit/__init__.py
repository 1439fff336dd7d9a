"""Test doubles for rwo-failover: the fixture API server, cluster builders and the demo.

They serve the tests, the demo and the benchmarks, and never ship in the image:
nothing in `rwo_failover` may import this package (import-linter checks it).
"""
