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
{{- if not (has (int .Values.replicas) (list 1 3)) -}}
{{- fail (printf "replicas must be 1 or 3 (a NATS cluster of 3 keeps the log with one replica down), not %v" .Values.replicas) -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled=true" -}}
{{- end -}}
{{- if and .Values.clusterAutoscaler.enabled (eq .Values.tls.mode "existing") (not .Values.tls.clientSecret) -}}
{{- fail "clusterAutoscaler.enabled with tls.mode=existing needs tls.clientSecret" -}}
{{- end -}}
{{- include "claimstream.validateProvisionTime" . -}}
{{- if not .Values.pool.existingConfigMap -}}
{{- include "claimstream.validatePool" .Values.pool.config -}}
{{- end -}}
{{- end -}}

{{/*
The pool file's rules that values.schema.json cannot say (its pool part is
generated from schemas/pool.schema.json), as handlers/pool checks them: a
pool.config serve would refuse at start fails here, before a rollout.
*/}}
{{- define "claimstream.validatePool" -}}
{{- $slotsOf := dict -}}
{{- range $i, $g := .groups -}}
{{- if hasKey $slotsOf $g.name -}}
{{- fail (printf "pool.config.groups[%d].name: duplicate group name %q" $i $g.name) -}}
{{- end -}}
{{- $_ := set $slotsOf $g.name 0 -}}
{{- end -}}
{{- $slots := dict -}}
{{- range $i, $s := (.slots | default list) -}}
{{- if hasKey $slots $s.name -}}
{{- fail (printf "pool.config.slots[%d].name: duplicate slot name %q" $i $s.name) -}}
{{- end -}}
{{- $_ := set $slots $s.name true -}}
{{- if not (hasKey $slotsOf $s.group) -}}
{{- fail (printf "pool.config.slots[%d].group: group %q is not declared in pool.config.groups" $i $s.group) -}}
{{- end -}}
{{- $_ := set $slotsOf $s.group (add1 (get $slotsOf $s.group)) -}}
{{- end -}}
{{- range $i, $g := .groups -}}
{{- $n := int (get $slotsOf $g.name) -}}
{{- $max := int ($g.maxSize | default 0) -}}
{{- $min := int ($g.minSize | default 0) -}}
{{- if gt $max $n -}}
{{- fail (printf "pool.config.groups[%d].maxSize: must be <= %d, the number of slots of group %q (got %d)" $i $n $g.name $max) -}}
{{- end -}}
{{- if and (gt $max 0) (gt $min $max) -}}
{{- fail (printf "pool.config.groups[%d].minSize: must be <= maxSize %d (got %d)" $i $max $min) -}}
{{- end -}}
{{- if gt $min $n -}}
{{- fail (printf "pool.config.groups[%d].minSize: must be <= %d, the number of slots of group %q (got %d)" $i $n $g.name $min) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service: the StatefulSet's pod DNS and the NATS routes. */}}
{{- define "claimstream.headless" -}}
{{- printf "%s-headless" (include "claimstream.fullname" .) -}}
{{- end -}}

{{/* "true" when the Services must select only the leader's Pod (more than
one replica; the leader labels its Pod claimstream.dev/leader=true). */}}
{{- define "claimstream.selectLeader" -}}
{{- if gt (int .Values.replicas) 1 -}}true{{- end -}}
{{- end -}}

{{/* Selector of the Services that must reach only the leader. */}}
{{- define "claimstream.leaderSelectorLabels" -}}
{{ include "claimstream.selectorLabels" . }}
{{- if include "claimstream.selectLeader" . }}
claimstream.dev/leader: "true"
{{- end }}
{{- end -}}

{{/* The REST API's (and the probes') scheme. */}}
{{- define "claimstream.apiScheme" -}}
{{- if .Values.rest.tls -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* The DNS name of replica i's NATS route: <fullname>-<i>.<headless>.<ns>.svc */}}
{{- define "claimstream.routeHosts" -}}
{{- $fullname := include "claimstream.fullname" . -}}
{{- $headless := include "claimstream.headless" . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc" $fullname $i $headless $.Release.Namespace) -}}
{{- end -}}
{{- join "," $hosts -}}
{{- end -}}

{{/* --nats-routes: every replica's route URL (its own is skipped by the server). */}}
{{- define "claimstream.routes" -}}
{{- $port := int .Values.nats.cluster.port -}}
{{- $urls := list -}}
{{- range (splitList "," (include "claimstream.routeHosts" .)) -}}
{{- $urls = append $urls (printf "nats-route://%s:%d" . $port) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{- define "claimstream.clusterPasswordSecret" -}}
{{- default (printf "%s-nats-cluster" (include "claimstream.fullname" .)) .Values.nats.cluster.existingPasswordSecret -}}
{{- end -}}

{{- define "claimstream.routeSecret" -}}
{{- if eq .Values.tls.mode "existing" -}}
{{- required "tls.routeSecret is required with tls.mode=existing, replicas: 3 and nats.cluster.tls" .Values.tls.routeSecret -}}
{{- else -}}
{{- printf "%s-route-tls" (include "claimstream.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The image tag: service.version of the telemetry too. */}}
{{- define "claimstream.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/* The chart's cluster-autoscaler Pods' labels. */}}
{{- define "claimstream.caSelectorLabels" -}}
app.kubernetes.io/name: {{ include "claimstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: cluster-autoscaler
{{- end -}}

{{/* The Secret holding the REST API's token (key `token`). */}}
{{- define "claimstream.apiTokenSecret" -}}
{{- default (printf "%s-api-token" (include "claimstream.fullname" .)) .Values.rest.existingTokenSecret -}}
{{- end -}}

{{/*
A Go duration string ("12m10s", "1.5h", "90s") as seconds; "0" or ""
is 0. Units: h, m, s, ms.
*/}}
{{- define "claimstream.durationSeconds" -}}
{{- $total := 0.0 -}}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 -}}
{{- range regexFindAll "[0-9]*\\.?[0-9]+(ms|h|m|s)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]*\\.?[0-9]+" . | float64 -}}
{{- $total = addf $total (mulf $n (get $units (regexReplaceAll "^[0-9]*\\.?[0-9]+" . ""))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
clusterAutoscaler.maxNodeProvisionTime must cover the boot budget of
every group that sets no maxNodeProvisionTime of its own (such a group
takes the flag's value from cluster-autoscaler): below it,
cluster-autoscaler gives up on a machine claimstream is still booting.
The budget is projections.Timeouts.Budget(): startupJobTimeout + the Job
monitor's 30s poll + registrationWait + readinessGate + the 10s uncordon
retry + a 1m margin, with the defaults 5m, 90s and 4m (12m10s). With
pool.existingConfigMap the groups are not known here and the default
budget is checked.
*/}}
{{- define "claimstream.validateProvisionTime" -}}
{{- $ca := .Values.clusterAutoscaler -}}
{{- if $ca.enabled -}}
{{- $flag := include "claimstream.durationSeconds" $ca.maxNodeProvisionTime | float64 -}}
{{- $groups := list (dict "name" "" "lifecycle" dict) -}}
{{- if and (not .Values.pool.existingConfigMap) .Values.pool.config .Values.pool.config.groups -}}
{{- $groups = .Values.pool.config.groups -}}
{{- end -}}
{{- range $groups -}}
{{- if not (gt (include "claimstream.durationSeconds" (.maxNodeProvisionTime | default "0") | float64) 0.0) -}}
{{- $l := .lifecycle | default dict -}}
{{- $job := include "claimstream.durationSeconds" ($l.startupJobTimeout | default "0") | float64 -}}
{{- if not (gt $job 0.0) -}}{{- $job = 300.0 -}}{{- end -}}
{{- $reg := include "claimstream.durationSeconds" ($l.registrationWait | default "0") | float64 -}}
{{- if not (gt $reg 0.0) -}}{{- $reg = 90.0 -}}{{- end -}}
{{- $gate := include "claimstream.durationSeconds" ($l.readinessGate | default "0") | float64 -}}
{{- if not (gt $gate 0.0) -}}{{- $gate = 240.0 -}}{{- end -}}
{{- $budget := addf $job 30.0 $reg $gate 10.0 60.0 -}}
{{- if lt $flag $budget -}}
{{- $who := "the default boot budget" -}}
{{- if .name -}}{{- $who = printf "the boot budget of group %q" .name -}}{{- end -}}
{{- fail (printf "clusterAutoscaler.maxNodeProvisionTime (%s) is below %s (%s: startupJobTimeout %s + Job poll 30s + registrationWait %s + readinessGate %s + uncordon retry 10s + margin 1m, the longest a claim may take from created to ready): cluster-autoscaler would give up on a machine claimstream is still booting. Set clusterAutoscaler.maxNodeProvisionTime to at least %s, or give the group a maxNodeProvisionTime of its own" (toString $ca.maxNodeProvisionTime) $who (duration (ceil $budget | int64)) (duration (int64 $job)) (duration (int64 $reg)) (duration (int64 $gate)) (duration (ceil $budget | int64))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the sinks file (key sinks.yaml), or "" for no sinks. */}}
{{- define "claimstream.sinksConfigMap" -}}
{{- if .Values.sinks.existingConfigMap -}}
{{- .Values.sinks.existingConfigMap -}}
{{- else if .Values.sinks.config -}}
{{- printf "%s-sinks" (include "claimstream.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the NATS subscriber's password (key `password`). */}}
{{- define "claimstream.natsSubscriberSecret" -}}
{{- default (printf "%s-nats-subscriber" (include "claimstream.fullname" .)) .Values.nats.subscriber.existingPasswordSecret -}}
{{- end -}}

{{/* The Secret holding the REST API's read-only token (key `token`). */}}
{{- define "claimstream.apiReadTokenSecret" -}}
{{- default (printf "%s-api-read-token" (include "claimstream.fullname" .)) .Values.rest.readToken.existingSecret -}}
{{- end -}}
