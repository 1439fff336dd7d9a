{{/* The name of every object: the release name (rwo-failover installs as "rwo-failover"); with nameOverride,
<release>-<nameOverride> (the release name alone when it contains nameOverride); or fullnameOverride. */}}
{{- define "rwo-failover.fullname" -}}
{{- $name := .Release.Name -}}
{{- if and .Values.nameOverride (not (contains .Values.nameOverride .Release.Name)) -}}
{{- $name = printf "%s-%s" .Release.Name .Values.nameOverride -}}
{{- end -}}
{{- default $name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What finds this release's pods, and no other's: app.kubernetes.io/name (which `kubectl rwo-failover status`
and the kustomize install use), app.kubernetes.io/instance (the release: two releases in one namespace never
select each other's pods) and, in ha mode, the component. Every selector, the pods' labels and the replicas'
anti-affinity use these. */}}
{{- define "rwo-failover.selectorLabels" -}}
app.kubernetes.io/name: rwo-failover
app.kubernetes.io/instance: {{ .Release.Name }}
{{- if eq .Values.mode "ha" }}
app.kubernetes.io/component: continuous
{{- end }}
{{- end -}}

{{/* Labels on each object's metadata, and commonLabels (rwo-failover.refuse keeps them off the chart's own). */}}
{{- define "rwo-failover.labels" -}}
app.kubernetes.io/name: rwo-failover
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels the chart sets itself, which commonLabels and podLabels may not set: on every object's metadata,
and (the first three) on the pods, where the selectors find them. */}}
{{- define "rwo-failover.ownLabels" -}}
app.kubernetes.io/name app.kubernetes.io/instance app.kubernetes.io/component helm.sh/chart app.kubernetes.io/managed-by app.kubernetes.io/version
{{- end -}}

{{/* The image, pinned by digest; a tag alone only with image.allowTagWithoutDigest (rwo-failover.refuse). */}}
{{- define "rwo-failover.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* image.pullPolicy, or by default IfNotPresent for an image pinned by digest (the cached copy is the one
reviewed, and a pass starts while the registry is down) and Always for a tag alone (it may have moved). */}}
{{- define "rwo-failover.pullPolicy" -}}
{{- .Values.image.pullPolicy | default (ternary "IfNotPresent" "Always" (ne (.Values.image.digest | default "") "")) -}}
{{- end -}}

{{/* The structured values, each by its path in values.yaml, and the setting it gives (tests/test_chart.py keeps
this equal to values.yaml and the schema). A list is joined with commas, as the program reads it. */}}
{{- define "rwo-failover.structured" -}}
dryRun: DRY_RUN
shutdownTaints: SHUTDOWN_TAINTS
minNotReadySeconds: MIN_NOT_READY_SECONDS
brakes.maxUnhealthyFraction: MAX_UNHEALTHY_FRACTION
brakes.maxNodesPerPass: MAX_NODES_PER_PASS
brakes.stormCooldownSeconds: STORM_COOLDOWN_SECONDS
brakes.maxPodsPerPass: MAX_PODS_PER_PASS
pods.stuckStates: STUCK_POD_STATES
pods.includeNamespaces: INCLUDE_NAMESPACES
pods.excludeNamespaces: EXCLUDE_NAMESPACES
pods.selector: POD_SELECTOR
outOfServiceTaint.mode: OUT_OF_SERVICE_TAINT
outOfServiceTaint.recoverySeconds: RECOVERY_SECONDS
undo: UNDO
fencing.mode: FENCING
fencing.minNotReadySeconds: FENCED_MIN_NOT_READY_SECONDS
fencing.networkFence.className: NETWORK_FENCE_CLASS
fencing.webhook.url: FENCE_WEBHOOK_URL
fencing.redfish.nodeLabel: REDFISH_NODE_LABEL
fencing.redfish.silentSeconds: REDFISH_SILENT_SECONDS
fencing.redfish.powerOff: REDFISH_POWER_OFF
fencing.redfish.offWaitSeconds: REDFISH_OFF_WAIT_SECONDS
recovery.timeoutSeconds: RECOVERY_TIMEOUT_SECONDS
recovery.namespace: RECOVERY_NAMESPACE
metrics.port: METRICS_PORT
metrics.pushgateway.url: PUSHGATEWAY_URL
metrics.pushgateway.instance: PUSHGATEWAY_INSTANCE
passTimeoutSeconds: PASS_TIMEOUT_SECONDS
log.format: LOG_FORMAT
log.level: LOG_LEVEL
allowUnsafe: ALLOW_UNSAFE
{{- end -}}

{{/* The structured values that name a Secret's key, by path, and the setting they give: a file mounted from it
(secretFiles) or, for PUSHGATEWAY_URL, an env var read from it (secretEnv). */}}
{{- define "rwo-failover.structuredSecrets" -}}
fencing.webhook.tokenSecret: FENCE_WEBHOOK_TOKEN_FILE
fencing.webhook.caSecret: FENCE_WEBHOOK_CA_FILE
fencing.redfish.bmcSecret: REDFISH_BMC_FILE
metrics.pushgateway.urlSecret: PUSHGATEWAY_URL
{{- end -}}

{{/* Every setting's default, the program's own (rwo_failover/settings/table.py; tests/test_chart.py keeps them
equal); empty for the four whose default is this release's (its namespace, its name). */}}
{{- define "rwo-failover.defaults" -}}
DRY_RUN: "false"
SHUTDOWN_TAINTS: "node.kubernetes.io/out-of-service,node.cloudprovider.kubernetes.io/shutdown"
MIN_NOT_READY_SECONDS: "3"
MAX_UNHEALTHY_FRACTION: "0.5"
MAX_NODES_PER_PASS: "5"
STORM_COOLDOWN_SECONDS: "300"
MAX_PODS_PER_PASS: "50"
STUCK_POD_STATES: "Terminating,Unknown,NodeLost,NotReady,NotStarted"
INCLUDE_NAMESPACES: ""
EXCLUDE_NAMESPACES: "kube-system"
POD_SELECTOR: ""
OUT_OF_SERVICE_TAINT: "auto"
RECOVERY_SECONDS: "60"
INTERVAL: "0"
ONCE_WAIT_SECONDS: "30"
WATCH: "true"
WATCH_STALE_SECONDS: "90"
RELIST_SECONDS: "3600"
FENCING: "none"
NETWORK_FENCE_CLASS: ""
FENCE_WEBHOOK_URL: ""
FENCE_WEBHOOK_TOKEN_FILE: ""
FENCE_WEBHOOK_CA_FILE: ""
FENCED_MIN_NOT_READY_SECONDS: "0"
REDFISH_BMC_FILE: ""
REDFISH_NODE_LABEL: ""
REDFISH_SILENT_SECONDS: "20"
REDFISH_POWER_OFF: "false"
REDFISH_OFF_WAIT_SECONDS: "30"
UNDO: "bootid"
RECOVERY_TIMEOUT_SECONDS: "600"
METRICS_PORT: "8080"
PUSHGATEWAY_URL: ""
PUSHGATEWAY_INSTANCE: ""
LEADER_ELECTION: "false"
LEADER_ELECTION_LEASE_SECONDS: "15"
LEADER_ELECTION_NAMESPACE: ""
LEADER_ELECTION_LEASE_NAME: ""
RECOVERY_NAMESPACE: ""
PASS_TIMEOUT_SECONDS: "45"
REQUEST_TIMEOUT_SECONDS: "10"
API_MAX_ATTEMPTS: "5"
PAGE_SIZE: "500"
LOG_FORMAT: "auto"
LOG_LEVEL: "INFO"
OUTPUT: "auto"
KUBECONFIG: ""
KUBE_CONTEXT: ""
ALLOW_UNSAFE: ""
{{- end -}}

{{/* The value at a dotted path of .root (a dict), as the string the program reads. */}}
{{- define "rwo-failover.valueAt" -}}
{{- $value := .root -}}
{{- range $key := splitList "." .path }}{{ $value = get (default dict $value) $key }}{{ end -}}
{{- include "rwo-failover.string" $value -}}
{{- end -}}

{{/* A value of any YAML type as the string the program reads: a list joined with commas, a whole number that
came through JSON (float64) as one (1000000, not 1e+06), true/false as such. */}}
{{- define "rwo-failover.string" -}}
{{- if kindIs "slice" . -}}
{{- $parts := list -}}{{- range . }}{{ $parts = append $parts (include "rwo-failover.string" .) }}{{ end -}}
{{- join "," $parts -}}
{{- else if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else if kindIs "invalid" . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* The Secret references of secretFiles (or of secretEnv, with "env" true), with the structured values' own
(fencing.redfish.bmcSecret, ...) added; a setting given both ways is refused. JSON, read back with fromJson. */}}
{{- define "rwo-failover.secretRefs" -}}
{{- $root := .root -}}
{{- $given := deepCopy (ternary $root.Values.secretEnv $root.Values.secretFiles .env | default dict) -}}
{{- $where := ternary "secretEnv" "secretFiles" .env -}}
{{- range $path, $name := include "rwo-failover.structuredSecrets" $root | fromYaml -}}
{{- if eq (eq $name "PUSHGATEWAY_URL") $.env -}}
{{- $ref := dict "root" $root.Values "path" (printf "%s.secretName" $path) | include "rwo-failover.valueAt" -}}
{{- if $ref -}}
{{- if hasKey $given $name -}}
{{- fail (printf "rwo-failover: %s is given both as %s and as %s.%s: name its Secret once, as %s" $name $path $where $name $path) -}}
{{- end -}}
{{- $key := dict "root" $root.Values "path" (printf "%s.key" $path) | include "rwo-failover.valueAt" -}}
{{- if not $key -}}
{{- fail (printf "rwo-failover: %s.secretName is set but %s.key is empty: name the Secret's key that holds %s" $path $path $name) -}}
{{- end -}}
{{- $_ := set $given $name (dict "secretName" $ref "key" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $given -}}
{{- end -}}

{{/* The settings this release runs with, as JSON (read back with fromJson): every setting's default, the
structured values over them, then `settings` and the mode's own settings (the escape hatch) over those, and the
four whose default is this release's (its namespace, its name: the Lease is <fullname>-leader). A setting given both as a structured value
(changed from its default) and in `settings`, differently, is refused: which one was meant cannot be told. The
env, the RBAC, the ports and NOTES.txt all read this one dict, so none can follow a setting the others ignore. */}}
{{- define "rwo-failover.settings" -}}
{{- $mode := ternary .Values.ha.settings .Values.cronjob.settings (eq .Values.mode "ha") | default dict -}}
{{- $flat := merge (deepCopy $mode) (deepCopy (.Values.settings | default dict)) -}}
{{- $defaults := include "rwo-failover.defaults" . | fromYaml -}}
{{- $env := dict -}}
{{- range $name, $default := $defaults }}{{ $_ := set $env $name (toString $default) }}{{ end -}}
{{- range $path, $name := include "rwo-failover.structured" . | fromYaml -}}
{{- $value := dict "root" $.Values "path" $path | include "rwo-failover.valueAt" -}}
{{- $changed := and (ne $value "") (ne $value (toString (get $defaults $name))) -}}
{{- if hasKey $flat $name -}}
{{- $flatValue := include "rwo-failover.string" (get $flat $name) -}}
{{- if and $changed (ne $flatValue $value) -}}
{{- fail (printf "rwo-failover: %s is given both as %s=%s and as settings.%s=%s: set it once, as %s (settings is the escape hatch for the settings that have no value of their own)" $name $path $value $name $flatValue $path) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $env $name $value -}}
{{- end -}}
{{- end -}}
{{- range $name, $value := $flat }}{{ $_ := set $env $name (include "rwo-failover.string" $value) }}{{ end -}}
{{- if not $env.LEADER_ELECTION_NAMESPACE }}{{ $_ := set $env "LEADER_ELECTION_NAMESPACE" .Release.Namespace }}{{ end -}}
{{- if not $env.RECOVERY_NAMESPACE }}{{ $_ := set $env "RECOVERY_NAMESPACE" .Release.Namespace }}{{ end -}}
{{- if not $env.PUSHGATEWAY_INSTANCE }}{{ $_ := set $env "PUSHGATEWAY_INSTANCE" (include "rwo-failover.fullname" .) }}{{ end -}}
{{- /* One leader Lease per release: two releases in one namespace never share one (nor take each other's lead). */}}
{{- if not $env.LEADER_ELECTION_LEASE_NAME }}{{ $_ := set $env "LEADER_ELECTION_LEASE_NAME" (printf "%s-leader" (include "rwo-failover.fullname" .)) }}{{ end -}}
{{- range $name, $ref := include "rwo-failover.secretRefs" (dict "root" . "env" false) | fromJson }}
{{- if ne (toString (get $env $name)) "" }}
{{- fail (printf "rwo-failover: %s is set both as a value and in secretFiles: the chart sets it to the file it mounts from secretFiles.%s; leave the value empty" $name $name) }}
{{- end }}
{{- $_ := set $env $name (printf "%s/%s" (include "rwo-failover.secretMountPath" $name) $ref.key) }}
{{- end }}
{{- range $name, $ref := include "rwo-failover.secretRefs" (dict "root" . "env" true) | fromJson }}
{{- if ne (toString (get $env $name)) "" }}
{{- fail (printf "rwo-failover: %s is set both as a value and in secretEnv: the pod reads it from secretEnv.%s's Secret; leave the value empty" $name $name) }}
{{- end }}
{{- end }}
{{- toJson $env -}}
{{- end -}}

{{/* Where secretFiles mounts the Secret that a setting names a file of: one folder per setting. */}}
{{- define "rwo-failover.secretMountPath" -}}
/etc/rwo-failover/secrets/{{ . | lower | replace "_" "-" }}
{{- end -}}

{{/* The ServiceAccount the pods run as and every binding names: serviceAccount.name, or the release's name. */}}
{{- define "rwo-failover.serviceAccountName" -}}
{{- default (include "rwo-failover.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The pods' PriorityClass: priorityClassName (an existing one), or the one this chart creates. */}}
{{- define "rwo-failover.priorityClassName" -}}
{{- default (include "rwo-failover.fullname" .) .Values.priorityClassName -}}
{{- end -}}

{{/* Refuse at render time what every pod would refuse at start (exit 2, rwo_failover/config.py) or the API
server would reject, so `helm install` says so instead of a CrashLoop. Each message names the setting and what
to do instead; tests/test_chart.py checks the program refuses the same settings. Renders nothing. */}}
{{- define "rwo-failover.refuse" -}}
{{- $env := include "rwo-failover.settings" . | fromJson -}}
{{- $true := list "true" "1" "yes" "on" -}}
{{- if and (not .Values.image.digest) (not .Values.image.allowTagWithoutDigest) -}}
{{- fail (printf "rwo-failover: image.digest is empty, so the pods would run %s by its tag alone. A tag can move, and during an outage each Job must run the code that was reviewed: set image.digest to the sha256:... of the image you pushed (docker buildx imagetools inspect), or set image.allowTagWithoutDigest=true to accept a movable tag" (include "rwo-failover.image" .)) -}}
{{- end -}}
{{- $ha := eq .Values.mode "ha" -}}
{{- $elected := has ($env.LEADER_ELECTION | toString | trim | lower) $true -}}
{{- if and $elected (not $ha) -}}
{{- fail "rwo-failover: LEADER_ELECTION=true needs continuous mode, and mode=cronjob runs one pass per Job (--once): use mode=ha, or leave LEADER_ELECTION false" -}}
{{- end -}}
{{- if and $ha (le (float64 ($env.INTERVAL | toString)) 0.0) -}}
{{- fail "rwo-failover: mode=ha needs INTERVAL > 0 (seconds between passes); INTERVAL=0 runs one pass and exits" -}}
{{- end -}}
{{- if and $elected (has ($env.DRY_RUN | toString | trim | lower) $true) -}}
{{- fail "rwo-failover: DRY_RUN=true (dryRun) with mode=ha (LEADER_ELECTION=true): a replica that changes nothing would hold the leader Lease, and every pod refuses it. For a first look, run a dry run by hand (make dry-run), or use mode=cronjob with DRY_RUN=true" -}}
{{- end -}}
{{- if and $ha (or (lt (int ($env.METRICS_PORT | toString)) 1) (gt (int ($env.METRICS_PORT | toString)) 65535)) -}}
{{- fail "rwo-failover: mode=ha serves /healthz, /readyz and /metrics on METRICS_PORT (metrics.port), which the probes and the Service use: set a port in 1-65535" -}}
{{- end -}}
{{- if and (eq ($env.FENCING | toString | lower) "networkfence") (not $env.NETWORK_FENCE_CLASS) -}}
{{- fail "rwo-failover: FENCING=networkfence (fencing.mode) needs NETWORK_FENCE_CLASS (fencing.networkFence.className: the NetworkFenceClass of your storage)" -}}
{{- end -}}
{{- if and (eq ($env.FENCING | toString | lower) "redfish") (not $env.REDFISH_BMC_FILE) -}}
{{- fail "rwo-failover: FENCING=redfish (fencing.mode) needs REDFISH_BMC_FILE: name the Secret key that holds the BMC map in fencing.redfish.bmcSecret (secretName, key; docs/fencing.md)" -}}
{{- end -}}
{{- if and (eq ($env.FENCING | toString | lower) "webhook") (not $env.FENCE_WEBHOOK_URL) -}}
{{- fail "rwo-failover: FENCING=webhook (fencing.mode) needs FENCE_WEBHOOK_URL (fencing.webhook.url: an https:// URL)" -}}
{{- end -}}
{{- if and (eq ($env.UNDO | toString | lower) "bmc") (ne ($env.FENCING | toString | lower) "redfish") -}}
{{- fail (printf "rwo-failover: UNDO=bmc (undo) needs FENCING=redfish (fencing.mode), the only mode with a BMC to see the machine power-cycled (fencing.mode is %v): use undo bootid or operator" $env.FENCING) -}}
{{- end -}}
{{- /* A one-shot run waits to see a node down itself (NotReady for the wait, and with REDFISH_POWER_OFF its Lease
silent 12 s, a quarter of the default 40 s Lease and 2 s, before a ForceOff), after a first pass of up to 6 s (and
1 s of margins), within two thirds of its deadline and 2 s, less 12 s (at most) kept for a BMC's Off after a
ForceOff: rwo_failover/settings/one_shot.py, whose rule tests/test_chart.py checks this against. With fencing the
NotReady wait may be shorter ("lease": 40 s); a wait of 0 has nothing to fit. */ -}}
{{- if not $ha -}}
{{- $wait := float64 ($env.MIN_NOT_READY_SECONDS | toString) -}}
{{- $fencing := $env.FENCING | toString | trim | lower -}}
{{- if ne $fencing "none" -}}
{{- $fenced := $env.FENCED_MIN_NOT_READY_SECONDS | toString | trim | lower -}}
{{- $fencedWait := ternary 40.0 (float64 $fenced) (eq $fenced "lease") -}}
{{- if lt $fencedWait $wait }}{{ $wait = $fencedWait }}{{ end -}}
{{- end -}}
{{- $offWait := 0.0 -}}
{{- if and (eq $fencing "redfish") (has ($env.REDFISH_POWER_OFF | toString | trim | lower) $true) -}}
{{- $offWait = min 12 (int ($env.REDFISH_OFF_WAIT_SECONDS | toString)) | float64 -}}
{{- if lt $wait 12.0 }}{{ $wait = 12.0 }}{{ end -}}
{{- end -}}
{{- $timeout := float64 ($env.PASS_TIMEOUT_SECONDS | toString) -}}
{{- $room := subf (addf (divf (mulf $timeout 2.0) 3.0) 2.0) (addf 7.0 $offWait) -}}
{{- if and (gt $wait 0.0) (gt $wait $room) -}}
{{- fail (printf "rwo-failover: MIN_NOT_READY_SECONDS=%v (minNotReadySeconds) cannot pass within one Job: a Job waits %vs to see a node down itself, after a first pass of up to 6 s, within PASS_TIMEOUT_SECONDS=%v (passTimeoutSeconds) less the third kept for acting (and the BMC's Off wait), so a Job whose first pass takes that long could never fail a node over. Raise passTimeoutSeconds, shorten the wait, or use mode=ha" $env.MIN_NOT_READY_SECONDS $wait $env.PASS_TIMEOUT_SECONDS) -}}
{{- end -}}
{{- end -}}
{{- if and $ha (not $elected) -}}
{{- fail (printf "rwo-failover: mode=ha with LEADER_ELECTION=%v: its %v replicas would each pass and write at once, unelected (and NOTES would name a Lease that never exists). Leave LEADER_ELECTION true in ha mode (ha.settings sets it), or use mode=cronjob" $env.LEADER_ELECTION .Values.ha.replicas) -}}
{{- end -}}
{{- /* The values that switch a safety rule off, as the program refuses them (rwo_failover/settings/unsafe.py):
only with ALLOW_UNSAFE (allowUnsafe) naming the rule. */ -}}
{{- $allowed := list -}}
{{- range $rule := splitList "," ($env.ALLOW_UNSAFE | toString) }}{{ $allowed = append $allowed (trim $rule) }}{{ end -}}
{{- if and (ge (float64 ($env.MAX_UNHEALTHY_FRACTION | toString)) 0.9) (not (has "unhealthy-fraction" $allowed)) -}}
{{- fail (printf "rwo-failover: MAX_UNHEALTHY_FRACTION=%v (brakes.maxUnhealthyFraction): at 0.9 or more the partition brake all but never trips. Set it below 0.9, or name the rule in allowUnsafe: [unhealthy-fraction]" $env.MAX_UNHEALTHY_FRACTION) -}}
{{- end -}}
{{- if and (eq (float64 ($env.STORM_COOLDOWN_SECONDS | toString)) 0.0) (not (has "storm-cooldown" $allowed)) -}}
{{- fail "rwo-failover: STORM_COOLDOWN_SECONDS=0 (brakes.stormCooldownSeconds): after a brake trips, passes would act again at the first calm moment of a flapping partition. Set it above 0, or name the rule in allowUnsafe: [storm-cooldown]" -}}
{{- end -}}
{{- if and (eq (float64 ($env.MIN_NOT_READY_SECONDS | toString)) 0.0) (eq ($env.FENCING | toString | lower) "none") (not (has "min-not-ready" $allowed)) -}}
{{- fail "rwo-failover: MIN_NOT_READY_SECONDS=0 (minNotReadySeconds) with FENCING=none: a node would be down at the node lifecycle controller's first verdict, with no margin and no fencing. Set it above 0, fence (fencing.mode), or name the rule in allowUnsafe: [min-not-ready]" -}}
{{- end -}}
{{- if gt (float64 ($env.REQUEST_TIMEOUT_SECONDS | toString)) (float64 ($env.PASS_TIMEOUT_SECONDS | toString)) -}}
{{- fail (printf "rwo-failover: REQUEST_TIMEOUT_SECONDS=%v is longer than PASS_TIMEOUT_SECONDS=%v (passTimeoutSeconds): one request could outlive the pass. Lower REQUEST_TIMEOUT_SECONDS (settings), or raise passTimeoutSeconds" $env.REQUEST_TIMEOUT_SECONDS $env.PASS_TIMEOUT_SECONDS) -}}
{{- end -}}
{{- include "rwo-failover.refuseTolerations" (dict "tolerations" .Values.tolerations "env" $env) -}}
{{- $names := splitList " " (include "rwo-failover.settingNames" .) -}}
{{- range $label := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component" -}}
{{- if hasKey $.Values.podLabels $label -}}
{{- fail (printf "rwo-failover: podLabels.%s: the chart sets this label itself; the Deployment's selector, the Service, the PodDisruptionBudget and the NetworkPolicy find the pods by it" $label) -}}
{{- end -}}
{{- end -}}
{{- range $label := splitList " " (include "rwo-failover.ownLabels" .) -}}
{{- if hasKey ($.Values.commonLabels | default dict) $label -}}
{{- fail (printf "rwo-failover: commonLabels.%s: the chart sets this label itself, on every object (and the selectors find the pods by the app.kubernetes.io ones); leave it out of commonLabels" $label) -}}
{{- end -}}
{{- end -}}
{{- range $label, $_ := .Values.commonLabels | default dict -}}
{{- if hasPrefix "pod-security.kubernetes.io/" $label -}}
{{- fail (printf "rwo-failover: commonLabels.%s: the chart's Namespace (namespace.create) sets the Pod Security labels itself, to the restricted profile; leave them out of commonLabels" $label) -}}
{{- end -}}
{{- if hasPrefix "app.kubernetes.io/" $label -}}
{{- fail (printf "rwo-failover: commonLabels.%s: the app.kubernetes.io labels are the chart's own (status and the selectors read them); leave them out of commonLabels" $label) -}}
{{- end -}}
{{- if hasPrefix "rbac.authorization.k8s.io/" $label -}}
{{- fail (printf "rwo-failover: commonLabels.%s: on the chart's ClusterRoles this label would aggregate them into built-in roles (aggregate-to-view: every holder of view, edit or admin would delete pods and patch nodes); leave it out of commonLabels" $label) -}}
{{- end -}}
{{- end -}}
{{- range $where, $labels := dict "commonLabels" (.Values.commonLabels | default dict) "podLabels" (.Values.podLabels | default dict) -}}
{{- range $label, $_ := $labels -}}
{{- if or (has $label (list "job-name" "controller-uid")) (hasPrefix "batch.kubernetes.io/" $label) -}}
{{- fail (printf "rwo-failover: %s.%s: the Job controller sets this label on each Job's pods itself, and refuses a Job whose pod template gives it another value, so no pass would ever run; leave it out" $where $label) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $label, $_ := .Values.monitoring.additionalLabels | default dict -}}
{{- if or (has $label (splitList " " (include "rwo-failover.ownLabels" $))) (hasKey ($.Values.commonLabels | default dict) $label) -}}
{{- fail (printf "rwo-failover: monitoring.additionalLabels.%s: the chart already sets this label on the PrometheusRule and the ServiceMonitor (its own, or commonLabels)" $label) -}}
{{- end -}}
{{- end -}}
{{- /* extraEnv comes after the settings in the container's env, where the later of two equal names wins: it
could override a setting, and with it every refusal above. A setting is set through its value or `settings`. */ -}}
{{- range $i, $var := .Values.extraEnv | default list -}}
{{- if has $var.name $names -}}
{{- fail (printf "rwo-failover: extraEnv[%d] sets %s, a setting of rwo-failover: the chart renders every setting itself and checks it (an unsafe one needs allowUnsafe); set it through its value or under settings, not extraEnv" $i $var.name) -}}
{{- end -}}
{{- end -}}
{{- range $i, $mount := .Values.extraVolumeMounts | default list -}}
{{- $path := printf "%s/" (trimSuffix "/" (clean $mount.mountPath)) -}}{{- /* clean: // . and .. as the kernel reads them */ -}}
{{- if hasPrefix "/etc/rwo-failover/secrets/" $path -}}
{{- fail (printf "rwo-failover: extraVolumeMounts[%d] mounts at %s, at or under /etc/rwo-failover/secrets, where the chart mounts secretFiles' Secrets: mount it elsewhere" $i $mount.mountPath) -}}
{{- end -}}
{{- end -}}
{{- if eq (include "rwo-failover.serviceAccountName" .) "default" -}}
{{- fail "rwo-failover: serviceAccount.name=default: the chart's bindings would give rwo-failover's rights (delete pods, patch nodes) to every pod in the namespace that names no ServiceAccount. Name an account of its own" -}}
{{- end -}}
{{- range $name, $ref := include "rwo-failover.secretRefs" (dict "root" . "env" false) | fromJson -}}
{{- if not (has $name $names) -}}
{{- fail (printf "rwo-failover: secretFiles.%s names no setting of rwo-failover %s; the settings that name a file end in _FILE (docs/settings.md)" $name $.Chart.AppVersion) -}}
{{- end -}}
{{- if hasPrefix ".." $ref.key -}}
{{- fail (printf "rwo-failover: secretFiles.%s.key=%s: a key mounted as a file may not start with \"..\"" $name $ref.key) -}}
{{- end -}}
{{- end -}}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@" ($env.PUSHGATEWAY_URL | toString | trim) -}}
{{- fail "rwo-failover: PUSHGATEWAY_URL holds a user or password, which would sit in plain text in the pod's env and in the release: put the whole URL in a Secret and name it in secretEnv.PUSHGATEWAY_URL (secretName, key) instead (the value is not shown here)" -}}
{{- end -}}
{{- /* What is left of a pass after SIGTERM (PASS_TIMEOUT_SECONDS at most), and a one-shot pass's metrics push
after it ($push: rwo_failover/run/metrics.py PUSH_TIMEOUT_SECONDS), must end before SIGKILL. */ -}}
{{- $pass := float64 ($env.PASS_TIMEOUT_SECONDS | toString) -}}
{{- $push := 10.0 -}}
{{- $pushes := and (not $ha) (or (ne ($env.PUSHGATEWAY_URL | toString | trim) "") (hasKey (include "rwo-failover.secretRefs" (dict "root" . "env" true) | fromJson) "PUSHGATEWAY_URL")) -}}
{{- $needed := ternary (addf $pass $push) $pass $pushes -}}
{{- $grace := .Values.terminationGracePeriodSeconds -}}
{{- if lt (float64 $grace) $needed -}}
{{- fail (printf "rwo-failover: terminationGracePeriodSeconds=%v is shorter than PASS_TIMEOUT_SECONDS=%v%s: after SIGTERM, what is left of a pass must finish before SIGKILL. Set terminationGracePeriodSeconds to at least %v" $grace $env.PASS_TIMEOUT_SECONDS (ternary " plus the 10 s metrics push (PUSHGATEWAY_URL)" "" $pushes) $needed) -}}
{{- end -}}
{{- $deadline := .Values.cronjob.activeDeadlineSeconds -}}
{{- if and (not $ha) (le (float64 $deadline) $pass) -}}
{{- fail (printf "rwo-failover: cronjob.activeDeadlineSeconds=%v is not longer than PASS_TIMEOUT_SECONDS=%v: the Job would be killed before the pass's own deadline (it counts from the Job's start, image pull and start-up included), with no summary line and no metrics. Set it above PASS_TIMEOUT_SECONDS plus start-up, and below the schedule's period (the default is 55)" $deadline $env.PASS_TIMEOUT_SECONDS) -}}
{{- end -}}
{{- end -}}

{{/* The taints of a dead or unreachable node, which values.yaml says no pod of ours may tolerate: the pods would
land on (or stay on) a dead node. The taints that SHUTDOWN_TAINTS names mark dead nodes too. A toleration with no
key tolerates every taint. Called with (dict "tolerations" ... "env" ...); renders nothing. */}}
{{- define "rwo-failover.refuseTolerations" -}}
{{- $never := list "node.kubernetes.io/unreachable" "node.kubernetes.io/not-ready" "node.cloudprovider.kubernetes.io/shutdown" "node.kubernetes.io/out-of-service" -}}
{{- range $taint := splitList "," (.env.SHUTDOWN_TAINTS | toString) -}}
{{- $key := regexReplaceAll "[=:].*$" (trim $taint) "" -}}
{{- if and $key (not (has $key $never)) }}{{ $never = append $never $key }}{{ end -}}
{{- end -}}
{{- range $i, $toleration := .tolerations -}}
{{- $key := $toleration.key | default "" | toString -}}
{{- if not $key -}}
{{- fail (printf "rwo-failover: tolerations[%d] has no key, so it tolerates every taint, among them %s: the pods would land on, or stay on, a dead node. Name the taint you mean (to run on the control plane: key node-role.kubernetes.io/control-plane, operator Exists, effect NoSchedule)" $i (join ", " $never)) -}}
{{- end -}}
{{- if has $key $never -}}
{{- fail (printf "rwo-failover: tolerations[%d] tolerates %s, a taint of a dead or unreachable node, which must never be tolerated (values.yaml): the pods would land on, or stay on, a dead node. Never tolerated: %s" $i $key (join ", " $never)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every setting as an environment variable, in the order of rwo_failover/config.py; then extraEnv (HTTPS_PROXY,
SSL_CERT_FILE, ...), never a setting's name (rwo-failover.refuse). */}}
{{- define "rwo-failover.env" -}}
{{- $env := include "rwo-failover.settings" . | fromJson -}}
{{- $secretEnv := include "rwo-failover.secretRefs" (dict "root" . "env" true) | fromJson -}}
{{- range $name := splitList " " (include "rwo-failover.settingNames" .) }}
{{- $value := get $env $name }}
{{- /* a whole number that came through JSON (float64) is written as one: 1000000, not 1e+06 */}}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}{{ $value = int64 $value }}{{ end }}
- name: {{ $name }}
{{- with get $secretEnv $name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName | quote }}
      key: {{ .key | quote }}
{{- else }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* secretFiles' Secrets: one read-only volume per setting, holding only the key it names, readable by the pod's
group (fsGroup, below) and no one else; then extraVolumes (a CA bundle, ...), as given. Renders nothing without
either. */}}
{{- define "rwo-failover.secretVolumes" -}}
{{- range $name, $ref := include "rwo-failover.secretRefs" (dict "root" . "env" false) | fromJson }}
- name: {{ printf "secret-%s" ($name | lower | replace "_" "-") | trunc 63 | trimSuffix "-" }}
  secret:
    secretName: {{ $ref.secretName | quote }}
    items:
      - key: {{ $ref.key | quote }}
        path: {{ $ref.key | quote }}
    defaultMode: 288  # 0440
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "rwo-failover.secretMounts" -}}
{{- range $name, $ref := include "rwo-failover.secretRefs" (dict "root" . "env" false) | fromJson }}
- name: {{ printf "secret-%s" ($name | lower | replace "_" "-") | trunc 63 | trimSuffix "-" }}
  mountPath: {{ include "rwo-failover.secretMountPath" $name }}
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod template's metadata: the selector labels, commonLabels and podLabels (podLabels win), podAnnotations. */}}
{{- define "rwo-failover.podMetadata" -}}
labels:
  {{- include "rwo-failover.selectorLabels" . | nindent 2 }}
  {{- with merge (deepCopy (.Values.podLabels | default dict)) (.Values.commonLabels | default dict) }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* What both modes' pod specs share before the containers: the ServiceAccount, priority, pull secrets and
placement. Never a toleration of a dead node's taints (rwo-failover.refuseTolerations). */}}
{{- define "rwo-failover.podPlacement" -}}
serviceAccountName: {{ include "rwo-failover.serviceAccountName" . }}
automountServiceAccountToken: true
priorityClassName: {{ include "rwo-failover.priorityClassName" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
  {{- include "rwo-failover.affinity" . | trim | nindent 2 }}
{{- end -}}

{{/* The pod spec both modes share; .component is "continuous" for the Deployment. */}}
{{- define "rwo-failover.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  {{- if include "rwo-failover.secretRefs" (dict "root" . "env" false) | fromJson }}
  # The group of secretFiles' files (mode 0440), so that the pod may read them.
  fsGroup: 65532
  {{- end }}
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "rwo-failover.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  runAsNonRoot: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* The pods' affinity. nodeAffinity: a preference for the control plane, or affinity.nodeAffinity instead.
affinity.podAffinity as given. podAntiAffinity: in ha mode the replicas' own rules come first (never two on one node; preferably not
two in one zone, so one zone's outage, the very event this is for, leaves a replica), and
affinity.podAntiAffinity's terms are added to them; in cronjob mode, as given. */}}
{{- define "rwo-failover.affinity" -}}
{{- $given := .Values.affinity | default dict }}
{{- $anti := $given.podAntiAffinity | default dict }}
{{- if eq .Values.mode "ha" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "rwo-failover.selectorLabels" . | nindent 10 }}
    {{- with $anti.requiredDuringSchedulingIgnoredDuringExecution }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: topology.kubernetes.io/zone
        labelSelector:
          matchLabels:
            {{- include "rwo-failover.selectorLabels" . | nindent 12 }}
    {{- with $anti.preferredDuringSchedulingIgnoredDuringExecution }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- else if $anti }}
podAntiAffinity:
  {{- toYaml $anti | nindent 2 }}
{{- end }}
{{- with $given.podAffinity }}
podAffinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $given.nodeAffinity }}
nodeAffinity:
  {{- toYaml $given.nodeAffinity | nindent 2 }}
{{- else }}
nodeAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference:
        matchExpressions:
          - key: node-role.kubernetes.io/control-plane
            operator: Exists
{{- end }}
{{- end -}}

{{/* The settings in the order of rwo_failover/config.py's SPECS (tests/test_chart.py keeps it equal). */}}
{{- define "rwo-failover.settingNames" -}}
DRY_RUN SHUTDOWN_TAINTS MIN_NOT_READY_SECONDS MAX_UNHEALTHY_FRACTION MAX_NODES_PER_PASS STORM_COOLDOWN_SECONDS MAX_PODS_PER_PASS STUCK_POD_STATES INCLUDE_NAMESPACES EXCLUDE_NAMESPACES POD_SELECTOR OUT_OF_SERVICE_TAINT RECOVERY_SECONDS INTERVAL ONCE_WAIT_SECONDS WATCH WATCH_STALE_SECONDS RELIST_SECONDS FENCING NETWORK_FENCE_CLASS FENCE_WEBHOOK_URL FENCE_WEBHOOK_TOKEN_FILE FENCE_WEBHOOK_CA_FILE FENCED_MIN_NOT_READY_SECONDS REDFISH_BMC_FILE REDFISH_NODE_LABEL REDFISH_SILENT_SECONDS REDFISH_POWER_OFF REDFISH_OFF_WAIT_SECONDS UNDO RECOVERY_TIMEOUT_SECONDS METRICS_PORT PUSHGATEWAY_URL PUSHGATEWAY_INSTANCE LEADER_ELECTION LEADER_ELECTION_LEASE_SECONDS LEADER_ELECTION_NAMESPACE LEADER_ELECTION_LEASE_NAME RECOVERY_NAMESPACE PASS_TIMEOUT_SECONDS REQUEST_TIMEOUT_SECONDS API_MAX_ATTEMPTS PAGE_SIZE LOG_FORMAT LOG_LEVEL OUTPUT KUBECONFIG KUBE_CONTEXT ALLOW_UNSAFE
{{- end -}}
