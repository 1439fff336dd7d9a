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

{{/* Every setting as an environment variable, in the order of rwo_failover/config.py: .Values.settings, the
mode's own settings over them, and the three whose default is this release's (its namespace, its name). */}}
{{- define "rwo-failover.env" -}}
{{- $root := .root -}}
{{- $env := merge (deepCopy .mode) (deepCopy $root.Values.settings) -}}
{{- if not $env.LEADER_ELECTION_NAMESPACE }}{{ $_ := set $env "LEADER_ELECTION_NAMESPACE" $root.Release.Namespace }}{{ end -}}
{{- if not $env.RECOVERY_NAMESPACE }}{{ $_ := set $env "RECOVERY_NAMESPACE" $root.Release.Namespace }}{{ end -}}
{{- if not $env.PUSHGATEWAY_INSTANCE }}{{ $_ := set $env "PUSHGATEWAY_INSTANCE" (include "rwo-failover.fullname" $root) }}{{ end -}}
{{- range $name := splitList " " (include "rwo-failover.settingNames" $root) }}
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
DRY_RUN SHUTDOWN_TAINTS MIN_NOT_READY_SECONDS MAX_UNHEALTHY_FRACTION MAX_NODES_PER_PASS MAX_PODS_PER_PASS STUCK_POD_STATES INCLUDE_NAMESPACES EXCLUDE_NAMESPACES POD_SELECTOR OUT_OF_SERVICE_TAINT RECOVERY_SECONDS INTERVAL WATCH WATCH_STALE_SECONDS RELIST_SECONDS FENCING NETWORK_FENCE_CLASS FENCE_WEBHOOK_URL FENCE_WEBHOOK_TOKEN_FILE FENCE_WEBHOOK_CA_FILE FENCED_MIN_NOT_READY_SECONDS RECOVERY_TIMEOUT_SECONDS METRICS_PORT PUSHGATEWAY_URL PUSHGATEWAY_INSTANCE LEADER_ELECTION LEADER_ELECTION_LEASE_SECONDS LEADER_ELECTION_NAMESPACE LEADER_ELECTION_LEASE_NAME RECOVERY_NAMESPACE PASS_TIMEOUT_SECONDS REQUEST_TIMEOUT_SECONDS API_MAX_ATTEMPTS PAGE_SIZE LOG_FORMAT LOG_LEVEL OUTPUT KUBECONFIG KUBE_CONTEXT
{{- end -}}
