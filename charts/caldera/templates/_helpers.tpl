{{/* Names, labels and the settings-to-flags rendering shared by every template. */}}

{{- define "caldera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name; component objects are "<fullname>-<component>". */}}
{{- define "caldera.fullname" -}}
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

{{- define "caldera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "caldera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: caldera
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "scheduler"). */}}
{{- define "caldera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "caldera.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "caldera.componentLabels" -}}
{{ include "caldera.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "caldera.serviceAccountName" -}}
{{- printf "%s-%s" (include "caldera.fullname" .root) .component -}}
{{- end -}}

{{- define "caldera.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "caldera.webhookServiceName" -}}
{{- printf "%s-webhook" (include "caldera.fullname" .) -}}
{{- end -}}

{{- define "caldera.webhookSecretName" -}}
{{- default (printf "%s-webhook-cert" (include "caldera.fullname" .)) .Values.certificates.existingSecret -}}
{{- end -}}

{{/*
Where the webhook's serving certificate comes from: certManager, existingSecret, webhook (the
webhook makes it and registers its CA) or helm (generated at render time).
*/}}
{{- define "caldera.certSource" -}}
{{- if .Values.certManager.enabled -}}certManager
{{- else if .Values.certificates.existingSecret -}}existingSecret
{{- else -}}{{ .Values.certificates.generator }}
{{- end -}}
{{- end -}}

{{/* The webhook Service's DNS names, the serving certificate's subject alternative names. */}}
{{- define "caldera.webhookDNSNames" -}}
{{- $svc := include "caldera.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- join "," (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end -}}

{{/* The webhook configurations the chart registers, by name (those with at least one path). */}}
{{- define "caldera.webhookConfigurationNames" -}}
{{- $enabled := .Values.webhook.settings.enabled_admission -}}
{{- if not $enabled }}{{ $enabled = list "/jobs/mutate" "/jobs/validate" "/queues/mutate" "/queues/validate" "/podgroups/mutate" "/podgroups/validate" "/pods/validate" "/cronjobs/validate" }}{{ end -}}
{{- if not .Values.webhook.admission.pods }}{{ $enabled = without $enabled "/pods/validate" }}{{ end -}}
{{- $names := list -}}
{{- range $kind := list "mutate" "validate" }}{{ range $enabled }}{{ if hasSuffix (printf "/%s" $kind) . }}{{ $names = append $names (printf "%s-%s" (include "caldera.fullname" $) $kind) }}{{ end }}{{ end }}{{ end -}}
{{- if .Values.webhook.admission.enabled }}{{ join "," (uniq $names) }}{{ end -}}
{{- end -}}

{{/* Namespace of a process's leader-election Lease: its setting, else the release namespace. */}}
{{- define "caldera.leaseNamespace" -}}
{{- default .root.Release.Namespace .settings.leader_election_namespace -}}
{{- end -}}

{{/*
One setting value as a flag value: lists comma-joined, whole numbers without an exponent
(Helm reads every YAML number as a float64, which would print 7340032 as 7.340032e+06).
*/}}
{{- define "caldera.flagValue" -}}
{{- $v := . -}}
{{- if kindIs "slice" $v -}}
{{- join "," $v -}}
{{- else if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) -}}
{{- int64 $v -}}
{{- else -}}
{{- $v -}}
{{- end -}}
{{- end -}}

{{/*
The container args of a process: one --flag=value per setting that is not null (nor an empty
string or list, which mean the process default), in name order,
then the chart-managed flags, then extraArgs. (dict "root" $ "proc" .Values.scheduler "managed" list)
*/}}
{{- define "caldera.args" -}}
{{- range $key, $value := .proc.settings }}
{{- if not (or (kindIs "invalid" $value) (and (or (kindIs "string" $value) (kindIs "slice" $value)) (empty $value))) }}
- {{ printf "--%s=%s" (replace "_" "-" $key) (include "caldera.flagValue" $value) | quote }}
{{- end }}
{{- end }}
{{- range .managed }}
- {{ . | quote }}
{{- end }}
{{- range .proc.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Checks every process's values must pass; fails the render with a message otherwise. */}}
{{- define "caldera.validateProcess" -}}
{{- $name := .name -}}
{{- $proc := .proc -}}
{{- if and (gt (int $proc.replicas) 1) (hasKey $proc.settings "leader_elect") (not $proc.settings.leader_elect) -}}
{{- fail (printf "%s.replicas is %d: more than one replica needs %s.settings.leader_elect: true, or replicas would act at once" $name (int $proc.replicas) $name) -}}
{{- end -}}
{{- $grace := 20.0 -}}
{{- if not (kindIs "invalid" $proc.settings.shutdown_grace_period) -}}
{{- $grace = float64 $proc.settings.shutdown_grace_period -}}
{{- end -}}
{{- if ge $grace (float64 $proc.terminationGracePeriodSeconds) -}}
{{- fail (printf "%s.settings.shutdown_grace_period (%v) must be below %s.terminationGracePeriodSeconds (%v), or the kubelet kills a clean shutdown" $name $proc.settings.shutdown_grace_period $name $proc.terminationGracePeriodSeconds) -}}
{{- end -}}
{{- if not (gt (int (default 8080 $proc.settings.metrics_port)) 0) -}}
{{- fail (printf "%s.settings.metrics_port must be a fixed port (1-65535): the probes and the metrics Service use it" $name) -}}
{{- end -}}
{{- end -}}

{{/* The metrics port of a process (its setting, else the process default 8080). */}}
{{- define "caldera.metricsPort" -}}
{{- include "caldera.flagValue" (default 8080 .settings.metrics_port) -}}
{{- end -}}

{{/*
The pod spec parts every process shares: (dict "root" $ "proc" .Values.x "component" "x").
*/}}
{{- define "caldera.podCommon" -}}
serviceAccountName: {{ include "caldera.serviceAccountName" . }}
automountServiceAccountToken: true
terminationGracePeriodSeconds: {{ .proc.terminationGracePeriodSeconds }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .proc.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .proc.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .proc.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .proc.affinity }}
affinity:
  {{- toYaml .proc.affinity | nindent 2 }}
{{- else if gt (int .proc.replicas) 1 }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "caldera.selectorLabels" . | nindent 12 }}
{{- end }}
{{- with .proc.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Environment every process gets: its namespace (the Lease's default) and pod name. */}}
{{- define "caldera.env" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- with .proc.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Probes on the metrics port: /healthz (liveness) and /readyz (readiness: caches synced). */}}
{{- define "caldera.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{/*
A process's Deployment. (dict "root" $ "proc" .Values.x "component" "x" "managed" (list flags)
"ports" yaml "volumes" yaml "mounts" yaml "podAnnotations" dict)
*/}}
{{- define "caldera.deployment" -}}
{{- $root := .root -}}
{{- $proc := .proc -}}
{{- include "caldera.validateProcess" (dict "name" .component "proc" $proc) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "caldera.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "caldera.componentLabels" . | nindent 4 }}
spec:
  replicas: {{ $proc.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "caldera.selectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: {{ if gt (int $proc.replicas) 1 }}1{{ else }}0{{ end }}
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "caldera.selectorLabels" . | nindent 8 }}
        {{- with $proc.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $annotations := merge (dict) (default (dict) .podAnnotations) (default (dict) $proc.podAnnotations) }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "caldera.podCommon" . | nindent 6 }}
      containers:
      - name: {{ .component }}
        image: {{ include "caldera.image" $root | quote }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        args:
        - {{ .component | quote }}
        {{- include "caldera.args" (dict "proc" $proc "managed" .managed) | trim | nindent 8 }}
        env:
        {{- include "caldera.env" . | nindent 8 }}
        ports:
        - name: metrics
          containerPort: {{ include "caldera.metricsPort" $proc }}
          protocol: TCP
        {{- with .ports }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- include "caldera.probes" . | nindent 8 }}
        resources:
          {{- toYaml $proc.resources | nindent 10 }}
        securityContext:
          {{- toYaml $root.Values.securityContext | nindent 10 }}
        volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- with .mounts }}
        {{- . | nindent 8 }}
        {{- end }}
      volumes:
      - name: tmp
        emptyDir:
          sizeLimit: 64Mi
      {{- with .volumes }}
      {{- . | nindent 6 }}
      {{- end }}
{{- end -}}
