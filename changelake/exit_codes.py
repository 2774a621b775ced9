"""Every changelake command's exit codes, one meaning each (README, "The command line")."""

from __future__ import annotations

OK = 0  # done; healthy; equal
ERROR = 1  # it failed: the message names the file, field or service
USAGE = 2  # the command line itself is wrong (argparse's own code)
NEEDS_A_PERSON = 3  # it ran, and found something wrong: unhealthy, stopped, different
NOT_RUNNING = 4  # nothing is wrong, and nothing runs: no pipeline, no connector registered
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells count it
