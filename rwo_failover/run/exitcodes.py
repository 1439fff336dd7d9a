"""Exit codes: each says what happened, so a CronJob's status and a shell's `$?` tell the truth.

The CronJob's podFailurePolicy (deploy/base/cronjob.yaml, the chart) acts on them: 2, 3 and 5 fail the Job at
once (a retry seconds later meets the same settings, RBAC or cluster), 1, 4 and 70 count towards its
backoffLimit (transient). docs/operations.md's exit-code table says what each means for a Job and which alert
fires; tests/test_docs.py keeps it, docs/settings.md and the manifests equal to this module.
"""

EXIT_OK = 0           # done, or nothing to do; or paused by an operator (observed and planned, nothing written)
EXIT_FAILED = 1       # some action failed; the next pass retries it
EXIT_CONFIG = 2       # bad setting or kubeconfig; nothing was read
EXIT_REFUSED = 3      # the brake or the split-brain guard refused; a human should look
EXIT_UNAVAILABLE = 4  # the cluster (or the pause switch) could not be read; nothing was changed
EXIT_FORBIDDEN = 5    # RBAC denied a call; the message names the verb
EXIT_CRASH = 70       # an uncaught exception: a bug (EX_SOFTWARE in sysexits.h)
# 6 is no longer used: it was "paused", which is not a failure (a paused pass exits 0 and says so in its summary
# line and rwo_failover_paused). Kept out of use, so that no other meaning takes it while old alerts know it.
RETIRED = {6: "paused (until issue 36: a paused pass now exits 0)"}

NAMES = {EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CONFIG: "config", EXIT_REFUSED: "refused",
         EXIT_UNAVAILABLE: "unavailable", EXIT_FORBIDDEN: "forbidden", EXIT_CRASH: "crash"}
PAUSED = "paused"  # rwo_failover_passes_total's result for a paused pass (exit 0, but no success)

# What a CronJob's Job does with each code that fails it (Kubernetes podFailurePolicy, GA in 1.31): FailJob
# ends the Job at once, Count retries it up to backoffLimit. The manifests' rules are checked against this.
FAIL_JOB = (EXIT_CONFIG, EXIT_REFUSED, EXIT_FORBIDDEN)
COUNT = (EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_CRASH)
