{{/* The operator image: image.repository and image.tag, else v<appVersion>. */}}
{{- define "paddock.image" -}}
{{- printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) -}}
{{- end -}}

{{/* Labels every object of the chart carries: the ones install.yaml has, and Helm's. */}}
{{- define "paddock.labels" -}}
app.kubernetes.io/name: paddock
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* GOMEMLIMIT: goMemLimit, else 90% of resources.limits.memory in bytes; nothing without a limit. */}}
{{- define "paddock.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{- .Values.goMemLimit -}}
{{- else if and .Values.resources.limits .Values.resources.limits.memory -}}
{{- $limit := toString .Values.resources.limits.memory -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "k" 1000 "M" 1000000 "G" 1000000000 "" 1 -}}
{{- $n := regexFind "^[0-9]+" $limit -}}
{{- $unit := trimPrefix $n $limit -}}
{{- if or (not $n) (not (hasKey $units $unit)) -}}
{{- fail (printf "resources.limits.memory %q: give goMemLimit, or a whole number with Ki, Mi, Gi, k, M, G or no suffix" $limit) -}}
{{- end -}}
{{- div (mul (atoi $n) (get $units $unit) 90) 100 -}}
{{- end -}}
{{- end -}}
