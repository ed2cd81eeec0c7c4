{{- define "clockflake.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "clockflake.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "clockflake.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clockflake.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "clockflake.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "clockflake.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The lease URI's Secret: the chart's own when lease.uri is set, else lease.existingSecret. */}}
{{- define "clockflake.leaseSecret" -}}
{{- if .Values.lease.uri -}}
{{- printf "%s-lease" (include "clockflake.fullname" .) -}}
{{- else -}}
{{- .Values.lease.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* Worker ids in the layout's pool: poolSize, else the preset's. */}}
{{- define "clockflake.poolSize" -}}
{{- $presets := dict "clockseq" 128 "twitter" 1024 "discord" 1024 "sonyflake" 65536 "js53" 16 -}}
{{- if .Values.poolSize -}}
{{- .Values.poolSize -}}
{{- else if hasKey $presets .Values.layout -}}
{{- get $presets .Values.layout -}}
{{- else -}}
{{- fail (printf "layout %q: set poolSize (2^worker bits)" .Values.layout) -}}
{{- end -}}
{{- end -}}

{{- define "clockflake.checks" -}}
{{- if not (has .Values.coordinator (list "postgres" "redis" "zookeeper" "k8s")) -}}
{{- fail (printf "coordinator %q: expected postgres, redis, zookeeper or k8s" .Values.coordinator) -}}
{{- end -}}
{{- if gt (int .Values.replicas) (int (include "clockflake.poolSize" .)) -}}
{{- fail (printf "replicas %v exceed the layout's %v worker ids" .Values.replicas (include "clockflake.poolSize" .)) -}}
{{- end -}}
{{- if and (ne .Values.coordinator "k8s") (not (include "clockflake.leaseSecret" .)) -}}
{{- fail "set lease.existingSecret (a Secret with the lease URI) or lease.uri" -}}
{{- end -}}
{{- end -}}

{{/* The pod template both workloads share. */}}
{{- define "clockflake.podTemplate" -}}
metadata:
  labels:
    {{- include "clockflake.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    {{- if .Values.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: "8080"
    prometheus.io/path: /metrics
    {{- end }}
    {{- if .Values.lease.uri }}
    checksum/lease: {{ .Values.lease.uri | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: clockflake-server
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["--listen", "0.0.0.0:8080"{{ if .Values.tls.secretName }}, "--tls-cert", "/etc/clockflake/tls/tls.crt", "--tls-key", "/etc/clockflake/tls/tls.key"{{ end }}]
      env:
        {{- if eq .Values.coordinator "k8s" }}
        - name: CLOCKFLAKE_LEASE
          value: {{ printf "k8s:///var/lib/clockflake?app=%s" (default .Release.Name .Values.lease.app) | quote }}
        - name: CLOCKFLAKE_POD_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
        {{- else }}
        - name: CLOCKFLAKE_LEASE
          valueFrom:
            secretKeyRef:
              name: {{ include "clockflake.leaseSecret" . }}
              key: {{ .Values.lease.secretKey }}
        {{- end }}
        - name: CLOCKFLAKE_LAYOUT
          value: {{ .Values.layout | quote }}
        {{- with .Values.onRollback }}
        - name: CLOCKFLAKE_ON_ROLLBACK
          value: {{ . | quote }}
        {{- end }}
        - name: CLOCKFLAKE_READY_MARGIN
          value: {{ .Values.readyMargin | quote }}
        - name: CLOCKFLAKE_SHUTDOWN_TIMEOUT
          value: {{ .Values.shutdownTimeout | quote }}
        - name: CLOCKFLAKE_MAX_COUNT
          value: {{ .Values.maxCount | quote }}
        - name: RUST_LOG
          value: {{ .Values.logLevel | quote }}
        {{- with .Values.publicIds.existingSecret }}
        - name: CLOCKFLAKE_PUBLIC_KEY_FILE
          value: /etc/clockflake/public/{{ $.Values.publicIds.key }}
        {{- end }}
        {{- with .Values.publicIds.tokenSecret }}
        - name: CLOCKFLAKE_PUBLIC_TOKEN_FILE
          value: /etc/clockflake/token/{{ $.Values.publicIds.tokenKey }}
        {{- end }}
      ports:
        - name: http
          containerPort: 8080
          protocol: TCP
      # Ready only while the lease is held: a pod without a worker id gets no traffic.
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
          scheme: {{ if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end }}
        periodSeconds: 2
        timeoutSeconds: 1
        failureThreshold: 1
      # Alive while the process answers; a lost lease is not a reason to restart (it leases again).
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
          scheme: {{ if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end }}
        periodSeconds: 10
        timeoutSeconds: 2
        failureThreshold: 3
      startupProbe:
        httpGet:
          path: /healthz
          port: http
          scheme: {{ if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end }}
        periodSeconds: 1
        failureThreshold: 30
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      {{- if or (eq .Values.coordinator "k8s") .Values.publicIds.existingSecret .Values.publicIds.tokenSecret .Values.tls.secretName }}
      volumeMounts:
        {{- if eq .Values.coordinator "k8s" }}
        - name: marks
          mountPath: /var/lib/clockflake
        {{- end }}
        {{- if .Values.publicIds.existingSecret }}
        - name: public-ids
          mountPath: /etc/clockflake/public
          readOnly: true
        {{- end }}
        {{- if .Values.publicIds.tokenSecret }}
        - name: public-token
          mountPath: /etc/clockflake/token
          readOnly: true
        {{- end }}
        {{- if .Values.tls.secretName }}
        - name: tls
          mountPath: /etc/clockflake/tls
          readOnly: true
        {{- end }}
      {{- end }}
  {{- if or .Values.publicIds.existingSecret .Values.publicIds.tokenSecret .Values.tls.secretName }}
  volumes:
    {{- with .Values.publicIds.existingSecret }}
    - name: public-ids
      secret:
        secretName: {{ . }}
    {{- end }}
    {{- with .Values.publicIds.tokenSecret }}
    - name: public-token
      secret:
        secretName: {{ . }}
    {{- end }}
    {{- with .Values.tls.secretName }}
    - name: tls
      secret:
        secretName: {{ . }}
    {{- end }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
