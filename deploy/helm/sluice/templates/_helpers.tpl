{{/* The chart's name, or nameOverride. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The resources' name: fullnameOverride, or release-chart (the release alone when it already names the chart). */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .Values.mode }}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Fails the render on values that would deploy a pod that cannot work. */}}
{{- define "sluice.validate" -}}
{{- if not (has .Values.mode (list "gateway" "sidecar")) }}
{{- fail (printf "mode must be gateway or sidecar, not %q" .Values.mode) }}
{{- end }}
{{- $admin := (.Values.config.admin | default dict).address | default "" }}
{{- if not (hasSuffix (printf ":%v" .Values.ports.admin) $admin) }}
{{- fail (printf "config.admin.address (%q) must listen on ports.admin (%v): the probes and metrics use it" $admin .Values.ports.admin) }}
{{- end }}
{{- $http := printf ":%v" .Values.ports.http }}
{{- $listening := false }}
{{- range (.Values.config.listeners | default list) }}
{{- if hasSuffix $http ((. | default dict).address | default "" | toString) }}
{{- $listening = true }}
{{- end }}
{{- end }}
{{- if not $listening }}
{{- fail (printf "config.listeners has no listener on ports.http (%v): the Service sends its traffic there" .Values.ports.http) }}
{{- end }}
{{- $tokenFile := (.Values.config.admin | default dict).token_file | default "" }}
{{- if and .Values.adminToken.enabled (ne $tokenFile "/etc/sluice-admin/token") }}
{{- fail (printf "adminToken.enabled mounts the admin token at /etc/sluice-admin/token: config.admin.token_file must name it, not %q" $tokenFile) }}
{{- end }}
{{- if and (not .Values.adminToken.enabled) (hasPrefix "/etc/sluice-admin/" $tokenFile) }}
{{- fail "adminToken.enabled is false, so nothing is mounted at /etc/sluice-admin: set config.admin.token_file to null (or to a file you mount)" }}
{{- end }}
{{- if hasKey .Values.files "sluice.yaml" }}
{{- fail "files must not hold sluice.yaml: it is made from config" }}
{{- end }}
{{- end }}

{{/* The sluice container, for either mode. */}}
{{- define "sluice.container" -}}
- name: sluice
  image: {{ include "sluice.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if and (eq .Values.mode "sidecar") .Values.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  args: {{ concat (list "proxy" "-c" "/etc/sluice/sluice.yaml") (ternary (list "--watch") (list) .Values.watch) .Values.extraArgs | toJson }}
  ports:
    - name: http
      containerPort: {{ .Values.ports.http }}
      protocol: TCP
    - name: admin
      containerPort: {{ .Values.ports.admin }}
      protocol: TCP
  startupProbe:
    httpGet: { path: /health, port: admin }
    {{- toYaml .Values.probes.startup | nindent 4 }}
  readinessProbe:
    httpGet: { path: /ready, port: admin }
    {{- toYaml .Values.probes.readiness | nindent 4 }}
  livenessProbe:
    httpGet: { path: /health, port: admin }
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  {{- if not (and (eq .Values.mode "sidecar") .Values.sidecar.native) }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ .Values.preStopSleepSeconds }}
  {{- end }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    # The whole directory, not a subPath: only then does a changed
    # ConfigMap reach the file, for `--watch` to see.
    - name: config
      mountPath: /etc/sluice
      readOnly: true
    {{- if .Values.adminToken.enabled }}
    - name: admin-token
      mountPath: /etc/sluice-admin
      readOnly: true
    {{- end }}
{{- end }}

{{/* The Secret holding the admin token. */}}
{{- define "sluice.adminSecret" -}}
{{- .Values.adminToken.existingSecret | default (printf "%s-admin" (include "sluice.fullname" .)) }}
{{- end }}
