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
app.kubernetes.io/name: {{ include "ledger-exporter.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "ledger-exporter.labels" -}}
helm.sh/chart: {{ include "ledger-exporter.chart" . | quote }}
{{ include "ledger-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
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
password, authorization's credentials and every header value; and what would carry one
there anyway: a token after the scheme in authorization.type ("Bearer xyz"), a password
after a colon in basic_auth.username, a key named as a credential (password, token,
api_key, ...: "ledger-exporter.credentialKeys"). Keys are compared as
"ledger-exporter.keyNormal" gives them (basicAuth, Password, "password ", a Cyrillic
"pаssword" or a full-width one too: the exporter refuses such a key, but only once the
ConfigMap is published), and inside basic_auth and authorization at any depth; a node key
with a character outside ASCII that folds to none is refused as a look-alike. Called with
(dict "where" "config.nodes[0] (validator-1)" "node" $node); no message shows a value.
*/}}
{{- define "ledger-exporter.refuseInlineSecrets" -}}
{{- $where := .where }}
{{- $node := .node }}
{{- $stay := "node credentials never go into the values or the ConfigMap" }}
{{- $file := "(a key of the Secret mounted by existingSecret or extraSecretMounts)" }}
{{- $env := "(an extraEnv variable with valueFrom.secretKeyRef)" }}
{{- if kindIs "map" $node }}
{{- range $key, $value := $node }}
{{- $normal := include "ledger-exporter.keyNormal" $key }}
{{- $shown := include "ledger-exporter.keyShown" $key }}
{{- if not (include "ledger-exporter.keyAscii" $key) }}
{{- fail (printf "%s: the key %s holds characters outside ASCII that are no known look-alike of a letter, as no key of the exporter does: write the key in ASCII (it may disguise a credential's, and %s; a password or token goes in a Secret, named by password_file or credentials_file %s, or by password_env or credentials_env %s)" $where $shown $stay $file $env) }}
{{- else if and (eq $normal "url") (kindIs "string" $value) (contains "@" $value) }}
{{- fail (printf "%s: %s has user-info (user:password@host), which would be written into the ConfigMap; %s: drop it from the url and set basic_auth with a username and password_file %s or password_env %s" $where $shown $stay $file $env) }}
{{- else if and (eq $normal "basicauth") $value }}
{{- if not (kindIs "map" $value) }}
{{- fail (printf "%s: %s must be a mapping, not a string that would write the password into the ConfigMap; %s: give a username and password_file %s or password_env %s" $where $shown $stay $file $env) }}
{{- end }}
{{- with include "ledger-exporter.secretKeyIn" (dict "at" $shown "block" $value) }}
{{- fail (printf "%s: %s would be written into the ConfigMap; %s: put the password in a Secret and use basic_auth.password_file %s or basic_auth.password_env %s" $where . $stay $file $env) }}
{{- end }}
{{- range $name, $user := $value }}
{{- if and (eq (include "ledger-exporter.keyNormal" $name) "username") (kindIs "string" $user) (contains ":" $user) }}
{{- fail (printf "%s: %s.%s holds a colon, which would carry a password (user:password) into the ConfigMap; %s: give the username alone, and the password as basic_auth.password_file %s or basic_auth.password_env %s" $where $shown (include "ledger-exporter.keyShown" $name) $stay $file $env) }}
{{- end }}
{{- end }}
{{- else if and (eq $normal "authorization") $value }}
{{- if not (kindIs "map" $value) }}
{{- fail (printf "%s: %s must be a mapping, not a string that would write the token into the ConfigMap; %s: give credentials_file %s or credentials_env %s" $where $shown $stay $file $env) }}
{{- end }}
{{- with include "ledger-exporter.secretKeyIn" (dict "at" $shown "block" $value) }}
{{- fail (printf "%s: %s would be written into the ConfigMap; %s: put the token in a Secret and use authorization.credentials_file %s or authorization.credentials_env %s" $where . $stay $file $env) }}
{{- end }}
{{- range $name, $type := $value }}
{{- if and (eq (include "ledger-exporter.keyNormal" $name) "type") (not (and (kindIs "string" $type) (regexMatch "^[-!#$%&'*+.^_`|~0-9A-Za-z]{1,32}$" $type))) }}
{{- fail (printf "%s: %s.%s must be the scheme alone (Bearer, a token of at most 32 characters), not the scheme and the token, which would be written into the ConfigMap; %s: put the token in a Secret and use authorization.credentials_file %s or authorization.credentials_env %s" $where $shown (include "ledger-exporter.keyShown" $name) $stay $file $env) }}
{{- end }}
{{- end }}
{{- else if and (eq $normal "headers") $value }}
{{- $at := $shown }}
{{- if kindIs "map" $value }}
{{- range $name, $_ := $value }}
{{- $at = printf "%s.%s" $shown (include "ledger-exporter.keyShown" $name) }}
{{- end }}
{{- end }}
{{- fail (printf "%s: %s would be written into the ConfigMap, and the exporter keeps every header value secret (it may be an API key) with no *_file or *_env form for it; %s: send a token with authorization.credentials_file %s or authorization.credentials_env %s" $where $at $stay $file $env) }}
{{- else if has $normal (include "ledger-exporter.credentialKeys" "" | splitList " ") }}
{{- fail (printf "%s: %s would be written into the ConfigMap; %s: put it in a Secret and use basic_auth.password_file or authorization.credentials_file %s, or basic_auth.password_env or authorization.credentials_env %s" $where $shown $stay $file $env) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* A values key as the credential check compares it: each character folded to the ASCII it
normalises to or looks like ("ledger-exporter.keyFolding": NFKC, combining marks left out,
Cyrillic and Greek look-alikes), lower case, and only its letters and digits kept, so that
basicAuth, Basic-Auth, "password ", a Cyrillic "pаssword", a full-width "ｐａｓｓｗｏｒｄ"
and "pass<zero-width space>word" are basic_auth and password. */}}
{{- define "ledger-exporter.keyNormal" -}}
{{- regexReplaceAll "[^a-z0-9]" (include "ledger-exporter.keyFolded" .) "" }}
{{- end }}

{{/* A key folded ("ledger-exporter.keyFolding") and lower-cased, nothing left out. */}}
{{- define "ledger-exporter.keyFolded" -}}
{{- $folding := include "ledger-exporter.keyFolding" "" | fromJson }}
{{- $folded := "" }}
{{- range splitList "" (toString .) }}
{{- $folded = print $folded (ternary (get $folding .) . (hasKey $folding .)) }}
{{- end }}
{{- lower $folded }}
{{- end }}

{{/* "true" when a key, folded, is ASCII: a character left outside (a zero-width space, a
look-alike the table lacks) disguises what the key is. */}}
{{- define "ledger-exporter.keyAscii" -}}
{{- if regexMatch "^[[:ascii:]]*$" (include "ledger-exporter.keyFolded" .) }}true{{ end }}
{{- end }}

{{/* Keys that name a credential, as "ledger-exporter.keyNormal" gives them: none is a key of
the exporter's config (its are password_file, credentials_env, ...), so one in the values
holds a secret that would be written into the ConfigMap. */}}
{{- define "ledger-exporter.credentialKeys" -}}
password passwd passphrase pass pwd credentials credential creds token bearertoken accesstoken authtoken apikey apitoken secret clientsecret secretkey privatekey
{{- end }}

{{/* Anywhere in the config (dict "at" "config" "node" $config): the path of the first key
that names a credential ("ledger-exporter.credentialKeys"), or nothing. */}}
{{- define "ledger-exporter.credentialKeyIn" -}}
{{- $found := "" }}
{{- $credentials := include "ledger-exporter.credentialKeys" "" | splitList " " }}
{{- if kindIs "map" .node }}
{{- range $key, $value := .node }}
{{- if not $found }}
{{- $at := printf "%s.%s" $.at (include "ledger-exporter.keyShown" $key) }}
{{- if has (include "ledger-exporter.keyNormal" $key) $credentials }}
{{- $found = $at }}
{{- else }}
{{- $found = include "ledger-exporter.credentialKeyIn" (dict "at" $at "node" $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- else if kindIs "slice" .node }}
{{- range $index, $value := .node }}
{{- if not $found }}
{{- $found = include "ledger-exporter.credentialKeyIn" (dict "at" (printf "%s[%d]" $.at $index) "node" $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- $found }}
{{- end }}

{{/* A values key in a message: as written, quoted when it holds more than a token's characters. */}}
{{- define "ledger-exporter.keyShown" -}}
{{- if regexMatch "^[-!#$%&'*+.^_`|~0-9A-Za-z]+$" . }}{{ . }}{{ else }}{{ quote . }}{{ end }}
{{- end }}

{{/* Inside a credentials block (dict "at" "basic_auth" "block" $block), at any depth: the path
of the first key that is a credential's (password, credentials) or another credentials block
(headers, basic_auth, authorization), or nothing. */}}
{{- define "ledger-exporter.secretKeyIn" -}}
{{- $found := "" }}
{{- if kindIs "map" .block }}
{{- range $key, $value := .block }}
{{- if not $found }}
{{- $at := printf "%s.%s" $.at (include "ledger-exporter.keyShown" $key) }}
{{- if or (has (include "ledger-exporter.keyNormal" $key) (list "headers" "basicauth" "authorization")) (has (include "ledger-exporter.keyNormal" $key) (include "ledger-exporter.credentialKeys" "" | splitList " ")) (not (include "ledger-exporter.keyAscii" $key)) }}
{{- $found = $at }}
{{- else }}
{{- $found = include "ledger-exporter.secretKeyIn" (dict "at" $at "block" $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- else if kindIs "slice" .block }}
{{- range $index, $value := .block }}
{{- if not $found }}
{{- $found = include "ledger-exporter.secretKeyIn" (dict "at" (printf "%s[%d]" $.at $index) "block" $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- $found }}
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
{{- if .Values.nodeFiles }}
{{- $_ := set $config "node_files" (append (default list $config.node_files) "/etc/ledger-exporter/nodes/*.yml") }}
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
{{- $_ := set $config "probe" (dict "allowed_targets" $allowed "modules" .Values.probe.modules "max_in_flight" .Values.probe.maxInFlight "debug" .Values.probe.debug) }}
{{- else if not (or $config.nodes $config.node_files $config.dns_sd_configs) }}
{{- fail "config.nodes is empty: list the nodes to poll (or nodeFiles, config.node_files, config.dns_sd_configs), or set probe.enabled" }}
{{- end }}
{{- with include "ledger-exporter.credentialKeyIn" (dict "at" "config" "node" $config) }}
{{- fail (printf "%s names a credential, whose value would be written into the ConfigMap; node credentials never go into the values or the ConfigMap: put it in a Secret and name its file (password_file, credentials_file: a key of the Secret mounted by existingSecret or extraSecretMounts) or its variable (password_env, credentials_env: an extraEnv variable with valueFrom.secretKeyRef)" .) }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* NOTES' warnings, each a paragraph: a pod that may run as root or privileged, no resource
bounds, a hostPath volume. The chart's defaults raise none. */}}
{{- define "ledger-exporter.warnings" -}}
{{- $pod := .Values.podSecurityContext | default dict }}
{{- $container := .Values.securityContext | default dict }}
{{- /* the container's settings win over the pod's */}}
{{- $user := "" }}
{{- $userFrom := "" }}
{{- $nonRoot := "" }}
{{- $nonRootFrom := "" }}
{{- range $where, $context := dict "podSecurityContext" $pod "securityContext" $container }}
{{- if and (hasKey $context "runAsUser") (not (kindIs "invalid" $context.runAsUser)) (or (not $userFrom) (eq $where "securityContext")) }}
{{- $user = int $context.runAsUser | toString }}
{{- $userFrom = $where }}
{{- end }}
{{- if and (hasKey $context "runAsNonRoot") (not (kindIs "invalid" $context.runAsNonRoot)) (or (not $nonRootFrom) (eq $where "securityContext")) }}
{{- $nonRoot = ternary "true" "false" (eq (toString $context.runAsNonRoot) "true") }}
{{- $nonRootFrom = $where }}
{{- end }}
{{- end }}
{{- $root := list }}
{{- if eq $user "0" }}
{{- $root = append $root (printf "%s.runAsUser is 0" $userFrom) }}
{{- end }}
{{- if and (not $user) (eq $nonRoot "false") }}
{{- $root = append $root (printf "no runAsUser, and %s.runAsNonRoot is false: the image's user runs it, root for many" $nonRootFrom) }}
{{- else if and (not $user) (not $nonRoot) }}
{{- $root = append $root "no runAsUser and no runAsNonRoot: the image's user runs it, root for many" }}
{{- end }}
{{- if $root }}

WARNING: the pod may run as root. The exporter needs no privilege: the chart's defaults run
it as uid 65532 with runAsNonRoot: true.
{{- range $root }}
  - {{ . }}
{{- end }}
{{- end }}
{{- $privileged := list }}
{{- if $container.privileged }}
{{- $privileged = append $privileged "securityContext.privileged is true" }}
{{- end }}
{{- if $container.allowPrivilegeEscalation }}
{{- $privileged = append $privileged "securityContext.allowPrivilegeEscalation is true" }}
{{- end }}
{{- if and (kindIs "map" $container.capabilities) $container.capabilities.add }}
{{- $privileged = append $privileged (printf "securityContext.capabilities.add gives %s" (join ", " $container.capabilities.add)) }}
{{- end }}
{{- if $privileged }}

WARNING: the container is privileged. The exporter needs no capability and no escalation:
the chart's defaults drop them all.
{{- range $privileged }}
  - {{ . }}
{{- end }}
{{- end }}
{{- if not .Values.resources }}

WARNING: resources is empty: the pod has no requests (the scheduler may put it where it
starves) and no memory limit (a leak would take the node's memory, not restart the pod):
keep the chart's default requests and limits (values.yaml), or set yours.
{{- end }}
{{- $hostPaths := list }}
{{- range .Values.extraVolumes }}
{{- if and (kindIs "map" .) (hasKey . "hostPath") }}
{{- $hostPaths = append $hostPaths (toString .name) }}
{{- end }}
{{- end }}
{{- if $hostPaths }}

WARNING: extraVolumes mounts a hostPath ({{ join ", " $hostPaths }}): the pod reads (or writes)
the node's own files, and is tied to what that node holds. Use a Secret, a ConfigMap or a
PersistentVolumeClaim instead.
{{- end }}
{{- end }}

{{/* --- replicas: daemon mode's StatefulSet, each pod its own state ----------------------- */}}

{{/* "true" in daemon mode: a StatefulSet, every replica polling every node with a state of
its own. Probe mode's replicas are interchangeable: a Deployment. */}}
{{- define "ledger-exporter.statefulSet" -}}
{{- if not .Values.probe.enabled }}true{{ end }}
{{- end }}

{{/* "true" when each pod gets its own claim from the StatefulSet's volumeClaimTemplates. */}}
{{- define "ledger-exporter.claimPerPod" -}}
{{- if and (include "ledger-exporter.statefulSet" .) .Values.persistence.enabled (not .Values.persistence.existingClaim) }}true{{ end }}
{{- end }}

{{/* "true" when one claim is mounted by every pod: persistence.existingClaim, or probe mode's
claim (a Deployment's pods share their volumes). */}}
{{- define "ledger-exporter.sharedClaim" -}}
{{- if and .Values.persistence.enabled (not (include "ledger-exporter.claimPerPod" .)) }}true{{ end }}
{{- end }}

{{/* "true" when several pods share one claim, which must then be ReadWriteMany: each keeps
its state in a file named after the pod ($(POD_NAME)). Fails, saying what to set, when the
claim is not ReadWriteMany (values.schema.json refuses the same first; this message is what
--skip-schema-validation shows). */}}
{{- define "ledger-exporter.statePerPod" -}}
{{- if and (include "ledger-exporter.sharedClaim" .) (gt (int .Values.replicas) 1) }}
{{- if not (has "ReadWriteMany" .Values.persistence.accessModes) }}
{{- if .Values.persistence.existingClaim }}
{{- fail (printf "persistence.existingClaim %s would be one claim for all %d replicas, and a ReadWriteOnce claim is mounted by one node's pods only: each replica keeps a state of its own. Set persistence.existingClaim: \"\" (each pod gets its own claim from the StatefulSet's volumeClaimTemplates), or replicas: 1 to keep that claim, or, when the claim is ReadWriteMany, persistence.accessModes: [ReadWriteMany] (each replica then writes state-<pod name>.json in it)" .Values.persistence.existingClaim (int .Values.replicas)) }}
{{- else }}
{{- fail (printf "probe mode's persistence makes one claim for all %d replicas of its Deployment, and a ReadWriteOnce claim is mounted by one node's pods only. Set persistence.accessModes: [ReadWriteMany] (a storage class that offers it; each replica then writes state-<pod name>.json in it), or replicas: 1, or persistence.enabled: false (probe mode keeps no state)" (int .Values.replicas)) }}
{{- end }}
{{- end -}}
true
{{- end }}
{{- end }}

{{/* The --state.file: state.json, or state-$(POD_NAME).json in a claim every pod shares. */}}
{{- define "ledger-exporter.stateFile" -}}
{{- if include "ledger-exporter.statePerPod" . -}}
/var/lib/ledger-exporter/state-$(POD_NAME).json
{{- else -}}
/var/lib/ledger-exporter/state.json
{{- end }}
{{- end }}

{{/* The pods' topologySpreadConstraints: the values', else, with several replicas, one on
kubernetes.io/hostname as replicaSpread asks (soft: ScheduleAnyway; hard: DoNotSchedule). */}}
{{- define "ledger-exporter.topologySpread" -}}
{{- if .Values.topologySpreadConstraints }}
{{- toYaml .Values.topologySpreadConstraints }}
{{- else if and (gt (int .Values.replicas) 1) (ne .Values.replicaSpread "none") }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: {{ ternary "DoNotSchedule" "ScheduleAnyway" (eq .Values.replicaSpread "hard") }}
  labelSelector:
    matchLabels:
      {{- include "ledger-exporter.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* The Services a ServiceMonitor scrapes: the chart's Service, never the StatefulSet's
headless one (its pods would be scraped twice). */}}
{{- define "ledger-exporter.serviceSelector" -}}
matchLabels:
  {{- include "ledger-exporter.selectorLabels" . | nindent 2 }}
matchExpressions:
  - key: ledger-exporter/headless
    operator: DoesNotExist
{{- end }}

{{/* The relabelings that make the replicas of this release one logical exporter, as the
mixin's rules expect: the pod's name in `exporter_replica` (the mixin's replicaLabels, which
every rule folds), and no `pod` label (the Operator sets it per pod, which would keep the
replicas' series apart after the fold). Called with (dict "root" $ "instance" "<value>"):
`instance`, when given, is set to it (the release's full name: the same on every replica). */}}
{{- define "ledger-exporter.replicaRelabelings" -}}
{{- with .instance }}
- targetLabel: instance
  replacement: {{ . | quote }}
  action: replace
{{- end }}
- sourceLabels: [__meta_kubernetes_pod_name]
  targetLabel: exporter_replica
  action: replace
- regex: pod
  action: labeldrop
{{- end }}

{{/* The headless Service's name: the full name, cut to leave room for "-headless". */}}
{{- define "ledger-exporter.headlessName" -}}
{{- printf "%s-headless" (include "ledger-exporter.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}
