"""Run: the process around the pipeline. The command line (`cli`), one pass from observe to summary line
(`runner`), continuous mode (`loop`), /healthz and /readyz (`health`), Prometheus metrics (`metrics`), JSON
logs (`logs`), exit codes (`exitcodes`) and the plan as a table for people (`plan_table`).

May use: every layer below (act, observe, the planner, kube, settings, the object model), prometheus-client,
python-json-logger and the standard library. Nothing imports this package but the entry points.
"""
