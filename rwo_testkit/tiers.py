"""`make test`: the fixture tier and the e2e tier at the same time, one pytest process each
(docs/testing.md, "CI time").

    python -m rwo_testkit.tiers [pytest arguments for both]

On CI's two cores the fixture tier keeps one busy, and the e2e tier mostly waits on a real control plane (node
grace periods, leases, controllers' resyncs), so the two side by side take about as long as the longer one. Not
pytest-xdist: the fixture tier's last tests judge the whole session (tests/test_rbac.py: every call the suite made;
tests/test_secrets.py: every log line), which workers would split, and the e2e tier shares one control plane per
module. Each tier keeps its own session: the e2e process also runs the secrets check over its own log lines and
the tokens it planted. Their output is printed one after the other when both are done (the e2e tier's first, so
the fixture tier's summary closes the log); the exit code is the first failing tier's, else 0.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRETS = "tests/test_secrets.py::test_no_planted_secret_appears_in_any_log_line_of_the_whole_suite"
TIERS = {"e2e": ["tests/e2e", SECRETS], "fixture": ["tests", "--ignore=tests/e2e"]}


def main(argv: list[str]) -> int:
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rwo-tiers-") as tmp:
        running = {}
        for name, args in TIERS.items():
            out = (Path(tmp) / f"{name}.log").open("w+", encoding="utf-8")
            proc = subprocess.Popen([sys.executable, "-m", "pytest", *args, *argv], cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT, text=True)
            running[name] = (proc, out, time.monotonic())
        print(f"tiers: {', '.join(running)} started side by side; their output follows when both are done",
              flush=True)
        ended: dict[str, float] = {}
        while len(ended) < len(running):
            for name, (proc, _out, _started) in running.items():
                if name not in ended and proc.poll() is not None:
                    ended[name] = time.monotonic()
            time.sleep(0.5)
        codes = {}
        for name, (proc, out, started) in running.items():
            codes[name] = proc.returncode
            out.seek(0)
            print(f"\n===== the {name} tier: exit {codes[name]}, {ended[name] - started:.0f} s =====", flush=True)
            sys.stdout.write(out.read())
            sys.stdout.flush()
            out.close()
    print(f"\ntiers: {'; '.join(f'{n} exit {c}' for n, c in codes.items())}; {time.monotonic() - began:.0f} s in all")
    return next((code for code in codes.values() if code != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
