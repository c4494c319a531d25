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

{{/*
Refuses a node credential written into the values: the config is a ConfigMap, readable by
anyone who may read ConfigMaps. The positions are the exporter's secret ones
(exporter/config/nodes.py SECRET_KEYS, SECRET_BLOCKS): a URL's user-info, basic_auth's
password, authorization's credentials and every header value. Called with
(dict "where" "config.nodes[0] (validator-1)" "node" $node); no message shows a value.
*/}}
{{- define "ledger-exporter.refuseInlineSecrets" -}}
{{- $where := .where }}
{{- $node := .node }}
{{- $stay := "node credentials never go into the values or the ConfigMap" }}
{{- $file := "(a key of the Secret mounted by existingSecret or extraSecretMounts)" }}
{{- $env := "(an extraEnv variable with valueFrom.secretKeyRef)" }}
{{- if kindIs "map" $node }}
{{- if and (kindIs "string" $node.url) (contains "@" $node.url) }}
{{- fail (printf "%s: url has user-info (user:password@host), which would be written into the ConfigMap; %s: drop it from the url and set basic_auth with a username and password_file %s or password_env %s" $where $stay $file $env) }}
{{- end }}
{{- with $node.basic_auth }}
{{- if not (kindIs "map" .) }}
{{- fail (printf "%s: basic_auth must be a mapping, not a string that would write the password into the ConfigMap; %s: give a username and password_file %s or password_env %s" $where $stay $file $env) }}
{{- end }}
{{- if hasKey . "password" }}
{{- fail (printf "%s: basic_auth.password would be written into the ConfigMap; %s: put the password in a Secret and use basic_auth.password_file %s or basic_auth.password_env %s" $where $stay $file $env) }}
{{- end }}
{{- end }}
{{- with $node.authorization }}
{{- if not (kindIs "map" .) }}
{{- fail (printf "%s: authorization must be a mapping, not a string that would write the token into the ConfigMap; %s: give credentials_file %s or credentials_env %s" $where $stay $file $env) }}
{{- end }}
{{- if hasKey . "credentials" }}
{{- fail (printf "%s: authorization.credentials would be written into the ConfigMap; %s: put the token in a Secret and use authorization.credentials_file %s or authorization.credentials_env %s" $where $stay $file $env) }}
{{- end }}
{{- end }}
{{- with $node.headers }}
{{- $key := "headers" }}
{{- if kindIs "map" . }}
{{- range $name, $_ := . }}
{{- if regexMatch "^[-!#$%&'*+.^_`|~0-9A-Za-z]+$" $name }}
{{- $key = printf "headers.%s" $name }}
{{- end }}
{{- end }}
{{- end }}
{{- fail (printf "%s: %s would be written into the ConfigMap, and the exporter keeps every header value secret (it may be an API key) with no *_file or *_env form for it; %s: send a token with authorization.credentials_file %s or authorization.credentials_env %s" $where $key $stay $file $env) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The exporter's config: `config`, with probe mode's section from `probe`. */}}
{{- define "ledger-exporter.config" -}}
{{- $config := deepCopy .Values.config }}
{{- range $index, $node := $config.nodes }}
{{- $where := printf "config.nodes[%d]" $index }}
{{- if and (kindIs "map" $node) (kindIs "string" $node.name) (regexMatch "^[-._:/0-9A-Za-z]+$" $node.name) }}
{{- $where = printf "%s (%s)" $where $node.name }}
{{- end }}
{{- include "ledger-exporter.refuseInlineSecrets" (dict "where" $where "node" $node) }}
{{- end }}
{{- if and (kindIs "map" $config.probe) (kindIs "map" $config.probe.modules) }}
{{- range $name, $module := $config.probe.modules }}
{{- include "ledger-exporter.refuseInlineSecrets" (dict "where" (printf "config.probe.modules.%s" $name) "node" $module) }}
{{- end }}
{{- end }}
{{- range $name, $module := .Values.probe.modules }}
{{- include "ledger-exporter.refuseInlineSecrets" (dict "where" (printf "probe.modules.%s" $name) "node" $module) }}
{{- end }}
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
