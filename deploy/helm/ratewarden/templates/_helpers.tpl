{{/* The chart's name, or nameOverride. */}}
{{- define "ratewarden.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, else the release's name with the
chart's unless it holds it already. */}}
{{- define "ratewarden.fullname" -}}
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

{{/* The labels that select this release's pods. */}}
{{- define "ratewarden.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ratewarden.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "ratewarden.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ratewarden.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: rate-limit-service
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image: repository@digest, else repository:tag, the tag defaulting
to the chart's appVersion. */}}
{{- define "ratewarden.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Where the server reads its limits (RLS_CONFIG_PATH): the image's own
example limits are there, and the chart's ConfigMap is mounted over them. */}}
{{- define "ratewarden.configPath" -}}
/etc/ratewarden/config
{{- end }}

{{/* The ConfigMap of the limits: limitsConfigMap, or the chart's. */}}
{{- define "ratewarden.limitsConfigMap" -}}
{{- .Values.limitsConfigMap | default (include "ratewarden.fullname" .) }}
{{- end }}

{{/* The files of the chart's ConfigMap, as YAML: limits, each a string as
written or YAML, else the example limits under files/. */}}
{{- define "ratewarden.limitsData" -}}
{{- $data := dict }}
{{- if .Values.limits }}
{{- range $file, $content := .Values.limits }}
{{- $_ := set $data $file (kindIs "string" $content | ternary $content (toYaml $content)) }}
{{- end }}
{{- else }}
{{- range $path, $_ := .Files.Glob "files/example-limits/*.yaml" }}
{{- $_ := set $data (base $path) ($.Files.Get $path) }}
{{- end }}
{{- end }}
{{- toYaml $data }}
{{- end }}

{{/* Redis's addresses, joined by commas: redis.addrs is a list or a
string. */}}
{{- define "ratewarden.redisAddrs" -}}
{{- if kindIs "string" .Values.redis.addrs }}
{{- .Values.redis.addrs }}
{{- else }}
{{- join "," .Values.redis.addrs }}
{{- end }}
{{- end }}

{{/* An env value as a string: a whole number as digits, where Helm would
write 1000000000, read as a float, as 1e+09. */}}
{{- define "ratewarden.envValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}
{{- int64 . | toString }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/* The variables the chart sets from its values, with the values that set
them, which env and extraEnv must not name. */}}
{{- define "ratewarden.chartVariables" -}}
RLS_CONFIG_PATH: limits, limitsConfigMap
RLS_BACKEND: redis.addrs
RLS_REDIS_ADDRS: redis.addrs
RLS_REDIS_MODE: redis.mode
RLS_REDIS_SENTINEL_MASTER: redis.sentinelMaster
RLS_REDIS_USERNAME: redis.username
RLS_REDIS_PASSWORD: redis.passwordSecret
RLS_REDIS_TLS: redis.tls
RLS_SHUTDOWN_DELAY: shutdown.delaySeconds
RLS_SHUTDOWN_TIMEOUT: shutdown.timeoutSeconds
RLS_HTTP_ADDR: the chart's HTTP port, 8080
RLS_GRPC_ADDR: the chart's gRPC port, 8081
{{- end }}

{{/* validate fails the render for values that cannot work together. */}}
{{- define "ratewarden.validate" -}}
{{- $chartVars := include "ratewarden.chartVariables" . | fromYaml }}
{{- range $name, $_ := .Values.env }}
{{- if hasKey $chartVars $name }}
{{- fail (printf "env.%s: the chart sets %s from %s; set that instead" $name $name (get $chartVars $name)) }}
{{- end }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if hasKey $chartVars .name }}
{{- fail (printf "extraEnv: the chart sets %s from %s; set that instead" .name (get $chartVars .name)) }}
{{- end }}
{{- end }}
{{- $shutdown := add .Values.shutdown.delaySeconds .Values.shutdown.timeoutSeconds }}
{{- if le (int .Values.terminationGracePeriodSeconds) (int $shutdown) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be more than shutdown.delaySeconds + shutdown.timeoutSeconds (%v): the kubelet kills the pod when it ends" .Values.terminationGracePeriodSeconds $shutdown) }}
{{- end }}
{{- if and (eq .Values.redis.mode "sentinel") (not .Values.redis.sentinelMaster) }}
{{- fail "redis.sentinelMaster: mode sentinel needs the name the Sentinels monitor the master under" }}
{{- end }}
{{- if and .Values.redis.sentinelMaster (ne .Values.redis.mode "sentinel") }}
{{- fail (printf "redis.sentinelMaster is for mode sentinel, and redis.mode is %s" .Values.redis.mode) }}
{{- end }}
{{- if and .Values.limits .Values.limitsConfigMap }}
{{- fail "limits and limitsConfigMap: one of them; limitsConfigMap mounts a ConfigMap that exists instead of the chart's" }}
{{- end }}
{{- end }}
