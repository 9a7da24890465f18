{{/* Chart name. */}}
{{- define "claimstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name. */}}
{{- define "claimstream.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "claimstream.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "claimstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "claimstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "claimstream.labels" -}}
helm.sh/chart: {{ include "claimstream.chart" . }}
app.kubernetes.io/name: {{ include "claimstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "claimstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "claimstream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "claimstream.jobNamespace" -}}
{{- default .Release.Namespace .Values.jobNamespace -}}
{{- end -}}

{{/* The gRPC Service's DNS name: cluster-autoscaler's address host and a server certificate SAN. */}}
{{- define "claimstream.grpcHost" -}}
{{- printf "%s-grpc.%s.svc" (include "claimstream.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "claimstream.serverSecret" -}}
{{- if eq .Values.tls.mode "existing" -}}
{{- required "tls.serverSecret is required with tls.mode=existing" .Values.tls.serverSecret -}}
{{- else -}}
{{- printf "%s-server-tls" (include "claimstream.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "claimstream.clientSecret" -}}
{{- if eq .Values.tls.mode "existing" -}}
{{- .Values.tls.clientSecret -}}
{{- else -}}
{{- printf "%s-client-tls" (include "claimstream.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "claimstream.poolConfigMap" -}}
{{- default (printf "%s-pool" (include "claimstream.fullname" .)) .Values.pool.existingConfigMap -}}
{{- end -}}

{{- define "claimstream.caName" -}}
{{- printf "%s-cluster-autoscaler" (include "claimstream.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "claimstream.caServiceAccountName" -}}
{{- default (include "claimstream.caName" .) .Values.clusterAutoscaler.serviceAccount.name -}}
{{- end -}}

{{- define "claimstream.validate" -}}
{{- if not (has .Values.tls.mode (list "generate" "existing" "cert-manager")) -}}
{{- fail (printf "tls.mode must be generate, existing or cert-manager, not %q" .Values.tls.mode) -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled=true" -}}
{{- end -}}
{{- if and .Values.clusterAutoscaler.enabled (eq .Values.tls.mode "existing") (not .Values.tls.clientSecret) -}}
{{- fail "clusterAutoscaler.enabled with tls.mode=existing needs tls.clientSecret" -}}
{{- end -}}
{{- end -}}
