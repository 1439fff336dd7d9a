{{/* The name of every object: the release name (rwo-failover installs as "rwo-failover"), or fullnameOverride. */}}
{{- define "rwo-failover.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on each object's metadata. Pod templates and selectors carry only app.kubernetes.io/name (and the
component), as the kustomize install does, so the two installs create the same pods. */}}
{{- define "rwo-failover.labels" -}}
app.kubernetes.io/name: rwo-failover
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "rwo-failover.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The settings this release runs with, as JSON (read back with fromJson): .Values.settings, the mode's own
settings over them, and the three whose default is this release's (its namespace, its name). The env, the RBAC,
the ports and NOTES.txt all read this one dict, so none can follow a setting the others ignore. */}}
{{- define "rwo-failover.settings" -}}
{{- $mode := ternary .Values.ha.settings .Values.cronjob.settings (eq .Values.mode "ha") | default dict -}}
{{- $env := merge (deepCopy $mode) (deepCopy .Values.settings) -}}
{{- if not $env.LEADER_ELECTION_NAMESPACE }}{{ $_ := set $env "LEADER_ELECTION_NAMESPACE" .Release.Namespace }}{{ end -}}
{{- if not $env.RECOVERY_NAMESPACE }}{{ $_ := set $env "RECOVERY_NAMESPACE" .Release.Namespace }}{{ end -}}
{{- if not $env.PUSHGATEWAY_INSTANCE }}{{ $_ := set $env "PUSHGATEWAY_INSTANCE" (include "rwo-failover.fullname" .) }}{{ end -}}
{{- toJson $env -}}
{{- end -}}

{{/* Refuse at render time what every pod would refuse at start (exit 2, rwo_failover/config.py) or the API
server would reject, so `helm install` says so instead of a CrashLoop. Each message names the setting and what
to do instead; tests/test_chart.py checks the program refuses the same settings. Renders nothing. */}}
{{- define "rwo-failover.refuse" -}}
{{- $env := include "rwo-failover.settings" . | fromJson -}}
{{- $true := list "true" "1" "yes" "on" -}}
{{- $ha := eq .Values.mode "ha" -}}
{{- $elected := has ($env.LEADER_ELECTION | toString | trim | lower) $true -}}
{{- if and $elected (not $ha) -}}
{{- fail "rwo-failover: LEADER_ELECTION=true needs continuous mode, and mode=cronjob runs one pass per Job (--once): use mode=ha, or leave LEADER_ELECTION false" -}}
{{- end -}}
{{- if and $ha (le (float64 ($env.INTERVAL | toString)) 0.0) -}}
{{- fail "rwo-failover: mode=ha needs INTERVAL > 0 (seconds between passes); INTERVAL=0 runs one pass and exits" -}}
{{- end -}}
{{- if and $elected (has ($env.DRY_RUN | toString | trim | lower) $true) -}}
{{- fail "rwo-failover: DRY_RUN=true with mode=ha (LEADER_ELECTION=true): a replica that changes nothing would hold the leader Lease, and every pod refuses it. For a first look, run a dry run by hand (make dry-run), or use mode=cronjob with DRY_RUN=true" -}}
{{- end -}}
{{- if and $ha (or (lt (int ($env.METRICS_PORT | toString)) 1) (gt (int ($env.METRICS_PORT | toString)) 65535)) -}}
{{- fail "rwo-failover: mode=ha serves /healthz, /readyz and /metrics on METRICS_PORT, which the probes and the Service use: set a port in 1-65535" -}}
{{- end -}}
{{- if and (eq ($env.FENCING | toString | lower) "networkfence") (not $env.NETWORK_FENCE_CLASS) -}}
{{- fail "rwo-failover: FENCING=networkfence needs NETWORK_FENCE_CLASS (the NetworkFenceClass of your storage)" -}}
{{- end -}}
{{- if and (eq ($env.FENCING | toString | lower) "webhook") (not $env.FENCE_WEBHOOK_URL) -}}
{{- fail "rwo-failover: FENCING=webhook needs FENCE_WEBHOOK_URL (an https:// URL)" -}}
{{- end -}}
{{- end -}}

{{/* Every setting as an environment variable, in the order of rwo_failover/config.py. */}}
{{- define "rwo-failover.env" -}}
{{- $env := include "rwo-failover.settings" . | fromJson -}}
{{- range $name := splitList " " (include "rwo-failover.settingNames" .) }}
{{- $value := get $env $name }}
{{- /* a whole number that came through JSON (float64) is written as one: 1000000, not 1e+06 */}}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}{{ $value = int64 $value }}{{ end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* The pod spec both modes share; .component is "continuous" for the Deployment. */}}
{{- define "rwo-failover.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
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

{{- define "rwo-failover.affinity" -}}
nodeAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference:
        matchExpressions:
          - key: node-role.kubernetes.io/control-plane
            operator: Exists
{{- end -}}

{{/* The settings in the order of rwo_failover/config.py's SPECS (tests/test_chart.py keeps it equal). */}}
{{- define "rwo-failover.settingNames" -}}
DRY_RUN SHUTDOWN_TAINTS MIN_NOT_READY_SECONDS MAX_UNHEALTHY_FRACTION MAX_NODES_PER_PASS MAX_PODS_PER_PASS STUCK_POD_STATES INCLUDE_NAMESPACES EXCLUDE_NAMESPACES POD_SELECTOR OUT_OF_SERVICE_TAINT RECOVERY_SECONDS INTERVAL WATCH WATCH_STALE_SECONDS RELIST_SECONDS FENCING NETWORK_FENCE_CLASS FENCE_WEBHOOK_URL FENCE_WEBHOOK_TOKEN_FILE FENCE_WEBHOOK_CA_FILE FENCED_MIN_NOT_READY_SECONDS RECOVERY_TIMEOUT_SECONDS METRICS_PORT PUSHGATEWAY_URL PUSHGATEWAY_INSTANCE LEADER_ELECTION LEADER_ELECTION_LEASE_SECONDS LEADER_ELECTION_NAMESPACE LEADER_ELECTION_LEASE_NAME RECOVERY_NAMESPACE PASS_TIMEOUT_SECONDS REQUEST_TIMEOUT_SECONDS API_MAX_ATTEMPTS PAGE_SIZE LOG_FORMAT LOG_LEVEL OUTPUT KUBECONFIG KUBE_CONTEXT ALLOW_UNSAFE
{{- end -}}
