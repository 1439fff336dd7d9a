#!/usr/bin/env python3
"""Run a command and report its true peak RSS.

The benchmark process holds the whole fake cluster, and a child forked from it keeps that
size as its peak RSS until it execs. Launching through this small process instead means
wait4() reports only the measured program.

    launch.py REPORT_PATH COMMAND...   writes {"maxrss_kb": ..., "code": ...} to REPORT_PATH
"""

import json
import os
import sys

pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w", encoding="utf-8") as report:
    json.dump({"maxrss_kb": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}, report)
