"""Act: carry out a plan, the only layer that writes to the cluster.

`actor` holds the order of operations per node (re-check, fence, taint, pods, attachments, Events); `recheck`
re-reads a node and its Lease live before every destructive write and judges them with the planner's own
rules; `writer` is the one writer (dry run, the write guard, outcomes); `node_taint` the taint's
read-modify-write; `fencing` and `fence_webhook` the fencing steps; `events` the Events; `recovery` the
records that confirm a freed pod came back; `outcome` what a pass did.

May use: the API access layer (kube), the planner, the object model, settings and the standard library.
Never observe or run: metrics reach act as a callback interface (recovery.RecoveryMetrics).
"""
