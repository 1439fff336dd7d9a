"""Exit codes: each says what happened, so a CronJob's status and a shell's `$?` tell the truth."""

EXIT_OK = 0           # done, or nothing to do
EXIT_FAILED = 1       # some action failed; the next pass retries it
EXIT_CONFIG = 2       # bad setting or kubeconfig; nothing was read
EXIT_REFUSED = 3      # the brake or the split-brain guard refused; a human should look
EXIT_UNAVAILABLE = 4  # the cluster could not be read; nothing was changed
EXIT_FORBIDDEN = 5    # RBAC denied a call; the message names the verb
EXIT_PAUSED = 6       # the pause switch is on (or unreadable): observed and planned, nothing written
EXIT_CRASH = 70       # an uncaught exception: a bug (EX_SOFTWARE in sysexits.h)

NAMES = {EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CONFIG: "config", EXIT_REFUSED: "refused",
         EXIT_UNAVAILABLE: "unavailable", EXIT_FORBIDDEN: "forbidden", EXIT_PAUSED: "paused", EXIT_CRASH: "crash"}
