{{/* The release's name for toolbus's objects: "toolbus" for a release called toolbus. */}}
{{- define "toolbus.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "toolbus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; component labels add app.kubernetes.io/component. */}}
{{- define "toolbus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "toolbus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolbus
{{- end -}}

{{/* Selector labels of a component: (dict "ctx" $ "component" "executor"). */}}
{{- define "toolbus.selector" -}}
app.kubernetes.io/name: {{ include "toolbus.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "toolbus.componentLabels" -}}
{{ include "toolbus.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "toolbus.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret of the NATS passwords. */}}
{{- define "toolbus.credentials" -}}
{{- default (printf "%s-nats-users" (include "toolbus.fullname" .)) .Values.credentials.existingSecret -}}
{{- end -}}

{{- define "toolbus.configMap" -}}
{{- printf "%s-config" (include "toolbus.fullname" .) -}}
{{- end -}}

{{/* The tenants of config, sorted, as a list. */}}
{{- define "toolbus.tenants" -}}
{{- $tenants := list -}}
{{- range $name, $_ := (default dict .Values.config.tenants) -}}
{{- $tenants = append $tenants $name -}}
{{- end -}}
{{- toJson (sortAlpha $tenants) -}}
{{- end -}}

{{/* The NATS users whose passwords the Secret holds: deploy/nats.conf's, and one per tenant. */}}
{{- define "toolbus.users" -}}
{{- $users := list "sys" "admin" "parser" "executor" "formatter" "healthd" "console" "orchestrator" -}}
{{- range (include "toolbus.tenants" . | fromJsonArray) -}}
{{- $users = append $users . -}}
{{- end -}}
{{- toJson $users -}}
{{- end -}}

{{/* The variable nats.conf reads a user's password from (deploy.PasswordVar). */}}
{{- define "toolbus.passwordVar" -}}
{{- printf "TOOLBUS_%s_PASSWORD" (. | replace "-" "_" | upper) -}}
{{- end -}}

{{/* NATS URLs with a user and its password, from the environment variable Kubernetes
fills in ($(VAR)): (dict "ctx" $ "user" "executor"). */}}
{{- define "toolbus.natsURL" -}}
{{- $user := .user -}}
{{- $var := include "toolbus.passwordVar" .user -}}
{{- $urls := list -}}
{{- range .ctx.Values.nats.urls -}}
{{- $parts := splitn "://" 2 . -}}
{{- $urls = append $urls (printf "%s://%s:$(%s)@%s" $parts._0 $user $var $parts._1) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/* The environment every service takes: its NATS user, the config, OTLP. */}}
{{- define "toolbus.env" -}}
{{- $var := include "toolbus.passwordVar" .user -}}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ include "toolbus.credentials" .ctx }}
      key: {{ $var }}
- name: TOOLBUS_NATS_URL
  value: {{ include "toolbus.natsURL" . | quote }}
- name: TOOLBUS_CONFIG
  value: /etc/toolbus/toolbus.json
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- with .ctx.Values.otlp }}
{{- if .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .sampler | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "toolbus-%s" $.service | quote }}
{{- if .resourceAttributes }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ .resourceAttributes | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The environment of the services that reach MCP servers: config's secrets, the OAuth key. */}}
{{- define "toolbus.secretEnv" -}}
{{- range $name, $ref := .Values.secretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- with .Values.tokenKeySecret }}
- name: TOOLBUS_TOKEN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .key }}
{{- end }}
{{- end -}}

{{/* The streams and consumers each stage pulls from, as bus.Topology.Consumers names them:
stage → list of {stream, consumer}. */}}
{{- define "toolbus.queues" -}}
{{- $parser := list (dict "stream" "TOOLBUS_RESPONSES" "consumer" "parser") (dict "stream" "TOOLBUS_STREAM" "consumer" "parser") -}}
{{- range (include "toolbus.tenants" . | fromJsonArray) -}}
{{- $parser = append $parser (dict "stream" (printf "TOOLBUS_RESPONSES_%s" .) "consumer" "parser") -}}
{{- $parser = append $parser (dict "stream" (printf "TOOLBUS_STREAM_%s" .) "consumer" "parser") -}}
{{- end -}}
{{- toJson (dict "parser" $parser "executor" (list (dict "stream" "TOOLBUS_CALLS" "consumer" "executor")) "formatter" (list (dict "stream" "TOOLBUS_RESULTS" "consumer" "formatter"))) -}}
{{- end -}}

{{/* The volumes and mounts of every toolbus container: the config, and a writable /tmp. */}}
{{- define "toolbus.volumes" -}}
- name: config
  configMap:
    name: {{ include "toolbus.configMap" . }}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "toolbus.volumeMounts" -}}
- name: config
  mountPath: /etc/toolbus
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* A duration of the configuration in whole seconds, rounded up: a number is seconds,
a string Go's duration ("90s", "1h30m", "1500ms"), as messages.Duration reads them. */}}
{{- define "toolbus.seconds" -}}
{{- if kindIs "string" . -}}
{{- $ns := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(h|ms|m|s|us|µs|ns)" . -1 -}}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" . | float64 -}}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . "" -}}
{{- $ns = addf $ns (mulf $n (get (dict "h" 3600e9 "m" 60e9 "s" 1e9 "ms" 1e6 "us" 1e3 "µs" 1e3 "ns" 1.0) $unit)) -}}
{{- end -}}
{{- divf $ns 1e9 | ceil | int -}}
{{- else -}}
{{- . | float64 | ceil | int -}}
{{- end -}}
{{- end -}}

{{/* The longest budget a call of the configuration may have, in seconds: the longest of
longestCallSeconds, executor.timeout (default 60s), each executor.tool_timeouts entry and
each mcpServers entry's timeout (pkg/executor: a call's budget is the first of its tool's,
its server's, the executor's and 60s). */}}
{{- define "toolbus.longestCall" -}}
{{- $cfg := .Values.config -}}
{{- $exec := default dict $cfg.executor -}}
{{- $longest := int .Values.longestCallSeconds -}}
{{- $budgets := list (ternary $exec.timeout "60s" (hasKey $exec "timeout")) -}}
{{- range $_, $d := (default dict $exec.tool_timeouts) }}{{ $budgets = append $budgets $d }}{{ end -}}
{{- range $_, $s := (default dict $cfg.mcpServers) }}{{ if and (kindIs "map" $s) (hasKey $s "timeout") }}{{ $budgets = append $budgets $s.timeout }}{{ end }}{{ end -}}
{{- range $budgets }}{{ $longest = max $longest (include "toolbus.seconds" . | int) }}{{ end -}}
{{- $longest -}}
{{- end -}}
