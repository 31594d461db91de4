{{/* Names are fixed (not release-prefixed): the Service name is part of the scheduler's urlPrefix. */}}
{{- define "schedlens.name" -}}schedlens{{- end -}}

{{- define "schedlens.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "schedlens.labels" -}}
app.kubernetes.io/part-of: schedlens
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "schedlens.serviceHost" -}}
schedlens.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* Pod and container security: non-root, no privilege escalation, read-only root, no capabilities. */}}
{{- define "schedlens.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "schedlens.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{- define "schedlens.envFrom" -}}
- configMapRef: {name: schedlens-env}
- secretRef: {name: {{ .Values.existingSecret }}}
{{- end -}}

{{/*
An HTTP probe of the web container. With mutual TLS the kubelet cannot present a client certificate, so the
probe runs in the container with the scheduler's client certificate instead.
*/}}
{{- define "schedlens.probe" -}}
{{- if and .root.Values.tls.enabled .root.Values.tls.requireClientCert }}
exec:
  command:
  - python
  - -c
  - >-
    import ssl, urllib.request as u;
    c = ssl.create_default_context(cafile="/etc/schedlens-probe-tls/ca.crt"); c.check_hostname = False;
    c.load_cert_chain("/etc/schedlens-probe-tls/tls.crt", "/etc/schedlens-probe-tls/tls.key");
    u.urlopen(u.Request("https://127.0.0.1:8000{{ .path }}", headers={"Host": "localhost"}), timeout=3, context=c)
{{- else }}
httpGet:
  path: {{ .path }}
  port: http
  scheme: {{ ternary "HTTPS" "HTTP" .root.Values.tls.enabled }}
  httpHeaders: [{name: Host, value: localhost}]
{{- end }}
{{- end -}}
