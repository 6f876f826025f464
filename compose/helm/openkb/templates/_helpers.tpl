{{- define "openkb.fullname" -}}
{{- printf "%s-openkb" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "openkb.labels" -}}
app.kubernetes.io/name: openkb
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "openkb.selector" -}}
app.kubernetes.io/name: openkb
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "openkb.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end -}}

{{- define "openkb.milvusUri" -}}
{{- if eq .Values.milvus.mode "standalone" -}}
{{ printf "http://%s-milvus:19530" (include "openkb.fullname" .) }}
{{- else if or (eq .Values.milvus.mode "cluster") (eq .Values.milvus.mode "external") -}}
{{ required "milvus.uri is required when milvus.mode is cluster or external" .Values.milvus.uri }}
{{- else -}}
{{ fail "milvus.mode must be standalone, cluster or external" }}
{{- end -}}
{{- end -}}

{{/* The environment every OpenKB container gets: settings from the ConfigMap, secrets by reference. */}}
{{- define "openkb.env" -}}
- name: OPENKB_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: secret-key}}
{{- if .Values.postgres.external }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: database-url}}
{{- else }}
- name: POSTGRES_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: postgres-password}}
- name: DATABASE_URL
  value: {{ printf "postgresql://%s:$(POSTGRES_PASSWORD)@%s-postgres:5432/%s" .Values.postgres.user (include "openkb.fullname" .) .Values.postgres.database | quote }}
{{- end }}
{{- if .Values.redis.external }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: redis-url}}
{{- else }}
- name: REDIS_URL
  value: {{ printf "redis://%s-redis:6379/0" (include "openkb.fullname" .) | quote }}
{{- end }}
- name: S3_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: s3-access-key}}
- name: S3_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: s3-secret-key}}
- name: MILVUS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: milvus-token, optional: true}}
- name: SMTP_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: smtp-password, optional: true}}
{{- end -}}
