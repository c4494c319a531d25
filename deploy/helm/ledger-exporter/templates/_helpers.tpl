{{/* The chart's name. */}}
{{- define "ledger-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, with the chart's unless the release holds it. */}}
{{- define "ledger-exporter.fullname" -}}
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

{{- define "ledger-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "ledger-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "ledger-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ledger-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "ledger-exporter.labels" -}}
helm.sh/chart: {{ include "ledger-exporter.chart" . }}
{{ include "ledger-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "ledger-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ledger-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* registry/repository:tag, or @digest; the tag defaults to the chart's appVersion. */}}
{{- define "ledger-exporter.image" -}}
{{- $repository := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repository = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The ConfigMap holding config.yml: the user's, or the chart's. */}}
{{- define "ledger-exporter.configMapName" -}}
{{- default (include "ledger-exporter.fullname" .) .Values.existingConfigMap }}
{{- end }}

{{/* "true" when the web config serves TLS: https for the scrapes and the kubelet. */}}
{{- define "ledger-exporter.tls" -}}
{{- if and .Values.webConfig.enabled (hasKey .Values.webConfig.config "tls_server_config") }}true{{ end }}
{{- end }}

{{/* "true" when the web config asks every request for a password. */}}
{{- define "ledger-exporter.basicAuth" -}}
{{- if and .Values.webConfig.enabled .Values.webConfig.config.basic_auth_users }}true{{ end }}
{{- end }}

{{/* The scheme of the exporter's endpoints. */}}
{{- define "ledger-exporter.scheme" -}}
{{- if include "ledger-exporter.tls" . }}https{{ else }}http{{ end }}
{{- end }}

{{/* The TLS and basic auth settings of a ServiceMonitor endpoint or a Probe. */}}
{{- define "ledger-exporter.scrapeAuth" -}}
{{- if include "ledger-exporter.tls" . }}
{{- with .Values.serviceMonitor.tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- if include "ledger-exporter.basicAuth" . }}
{{- if not .Values.serviceMonitor.basicAuth }}
{{- fail "webConfig.config.basic_auth_users is set: give Prometheus the password with serviceMonitor.basicAuth ({username: {name, key}, password: {name, key}} in a Secret), or its scrapes get 401" }}
{{- end }}
basicAuth:
  {{- toYaml .Values.serviceMonitor.basicAuth | nindent 2 }}
{{- end }}
{{- end }}

{{/* The exporter's config: `config`, with probe mode's section from `probe`. */}}
{{- define "ledger-exporter.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if .Values.probe.enabled }}
{{- if hasKey $config "probe" }}
{{- fail "probe mode is set under probe: (allowedTargets, modules, maxInFlight), not config.probe" }}
{{- end }}
{{- $allowed := .Values.probe.allowedTargets }}
{{- if not $allowed }}
{{- range .Values.probe.targets }}
{{- $allowed = append $allowed (regexQuoteMeta .url) }}
{{- end }}
{{- end }}
{{- if not $allowed }}
{{- fail "probe.enabled: list probe.targets, or probe.allowedTargets for targets named elsewhere" }}
{{- end }}
{{- $_ := set $config "probe" (dict "allowed_targets" $allowed "modules" .Values.probe.modules "max_in_flight" .Values.probe.maxInFlight) }}
{{- else if not $config.nodes }}
{{- fail "config.nodes is empty: list the nodes to poll, or set probe.enabled" }}
{{- end }}
{{- toYaml $config }}
{{- end }}
