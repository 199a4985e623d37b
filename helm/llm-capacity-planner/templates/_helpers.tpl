{{- define "planner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "planner.fullname" -}}
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

{{- define "planner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "planner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "planner.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "planner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: planner
app.kubernetes.io/part-of: llm-capacity-planner
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "planner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "planner.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "planner.leaseName" -}}
{{- default (include "planner.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- /* The planner's settings as container environment: every container of the pod gets the
same (service.role says which part runs in which, values "processes"). */ -}}
{{- define "planner.env" -}}
- name: PLANNER_HOST
  value: "0.0.0.0"
- name: PLANNER_PORT
  value: "8080"
- name: PLANNER_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- if .Values.database.existingSecret }}
- name: PLANNER_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.secretKey }}
{{- else }}
- name: PLANNER_DATABASE_URL
  value: sqlite:////var/lib/planner/planner.db
{{- end }}
# Kubernetes source (in-cluster service account) and leader election over a Lease:
# only the leader ingests and writes; every replica serves reads.
- name: PLANNER_KUBERNETES__ENABLED
  value: "on"
- name: PLANNER_KUBERNETES__LEADER_ELECTION
  value: {{ .Values.leaderElection.enabled | quote }}
- name: PLANNER_KUBERNETES__LEASE_NAME
  value: {{ include "planner.leaseName" . | quote }}
- name: PLANNER_KUBERNETES__LEASE_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: PLANNER_KUBERNETES__IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: PLANNER_KUBERNETES__ADMISSION_CHECK__ENABLED
  value: {{ .Values.rbac.integrations.kueueAdmissionCheck | quote }}
- name: PLANNER_KUBERNETES__HINT_ANNOTATIONS
  value: {{ .Values.rbac.integrations.hintAnnotations | quote }}
- name: PLANNER_KUBERNETES__PUBLISH__WORKLOAD_ADMISSION
  value: {{ and .Values.rbac.integrations.kueue .Values.rbac.integrations.publishWorkloadAdmission | quote }}
- name: PLANNER_KUBERNETES__PUBLISH__TRAINJOB_PROGRESS
  value: {{ and .Values.rbac.integrations.trainjob .Values.rbac.integrations.publishTrainjobProgress | quote }}
- name: PLANNER_KUBERNETES__PUBLISH__EXPECTED_RUNTIME
  value: {{ .Values.rbac.integrations.publishExpectedRuntime | quote }}
# Who may call the API (docs/security.md), read-only mode, shutdown within the
# pod's grace period.
- name: PLANNER_AUTH__MODE
  value: {{ .Values.auth.mode | quote }}
{{- if eq .Values.auth.mode "token" }}
- name: PLANNER_AUTH__TOKEN_FILE
  value: /etc/planner/auth/{{ .Values.auth.secretKey }}
{{- end }}
- name: PLANNER_AUTH__ANONYMOUS_READ
  value: {{ .Values.auth.anonymousRead | quote }}
- name: PLANNER_AUTH__CORS_ORIGINS
  value: {{ .Values.auth.corsOrigins | toJson | quote }}
- name: PLANNER_READ_ONLY
  value: {{ .Values.readOnly | quote }}
- name: PLANNER_SHUTDOWN_GRACE_S
  value: "15"
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}

{{- define "planner.volumeMounts" -}}
- name: data
  mountPath: /var/lib/planner
- name: tmp
  mountPath: /tmp
{{- if eq .Values.auth.mode "token" }}
- name: auth
  mountPath: /etc/planner/auth
  readOnly: true
{{- end }}
{{- end }}
