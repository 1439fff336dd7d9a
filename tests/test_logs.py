"""Where log lines go: every module logs under its own name (logging.getLogger(__name__)), a child of
`logs.LOGGER`, whose one handler `logs.setup` installs; the test session's sink (rwo_testkit/log_sink.py) sees
every line, so the secrets check at the end greps them all."""

from __future__ import annotations

import io
import json
import logging
import pkgutil
import re

from conftest import ROOT, SESSION_LOG

import rwo_failover
from rwo_failover.run import logs


def test_a_module_s_line_reaches_the_output_once_and_the_session_s_sink():
    out = io.StringIO()
    logs.setup("json", "INFO", out)
    logging.getLogger("rwo_failover.act.writer").warning("a line from a module", extra={"node": "n1"})
    [line] = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (line["message"], line["node"], line["level"]) == ("a line from a module", "n1", "WARNING")
    assert sum("a line from a module" in seen for seen in SESSION_LOG.lines) == 1


def test_setup_replaces_its_own_handler_and_keeps_the_others():
    first, second = io.StringIO(), io.StringIO()
    logs.setup("json", "INFO", first)
    logs.setup("json", "INFO", second)
    logging.getLogger("rwo_failover.run.cli").info("after the second setup")
    assert "after the second setup" in second.getvalue() and first.getvalue() == ""
    assert SESSION_LOG in logging.getLogger(logs.LOGGER).handlers


def test_every_module_that_logs_does_so_under_its_own_name():
    shared = []
    for module in pkgutil.walk_packages(rwo_failover.__path__, "rwo_failover."):
        path = ROOT / (module.name.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / module.name.replace(".", "/") / "__init__.py"
        for call in re.findall(r"^\w+ = logging\.getLogger\(([^)]*)\)", path.read_text(encoding="utf-8"), re.M):
            if call != "__name__":  # a module's own logger; logs.py and cli.py read the parent's handlers
                shared.append(f"{module.name}: getLogger({call})")
    assert shared == []
