{{/* The app.kubernetes.io/name label: the chart's name. */}}
{{- define "kserve-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Object names: "kserve-injector" whatever the release is called, as in the
kustomize install (the webhook configuration and ClusterRole are cluster-wide).
*/}}
{{- define "kserve-injector.fullname" -}}
{{- default "kserve-injector" .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "kserve-injector.serviceAccountName" -}}
{{- default (include "kserve-injector.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The serving Secret the pods mount. */}}
{{- define "kserve-injector.servingSecret" -}}
{{- if and (eq .Values.certificates.mode "provided") .Values.certificates.provided.existingSecret -}}
{{- .Values.certificates.provided.existingSecret }}
{{- else -}}
{{- printf "%s-serving-cert" (include "kserve-injector.fullname" .) }}
{{- end }}
{{- end }}

{{/* Selector labels: the only label the kustomize install sets. */}}
{{- define "kserve-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kserve-injector.name" . }}
{{- end }}

{{/* Labels of every object: the selector label plus Helm's own. */}}
{{- define "kserve-injector.labels" -}}
{{ include "kserve-injector.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kserve-injector.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end }}
{{- end }}

{{/* <service>.<namespace>.svc and .svc.cluster.local: the serving certificate's names. */}}
{{- define "kserve-injector.dnsNames" -}}
{{- $svc := printf "%s.%s.svc" (include "kserve-injector.fullname" .) .Release.Namespace -}}
{{- list $svc (printf "%s.cluster.local" $svc) | toJson }}
{{- end }}

{{/*
A duration as `serve` takes it (500ms, 3s, 1m) in milliseconds; the schema
restricts the named timeouts to these forms.
*/}}
{{- define "kserve-injector.millis" -}}
{{- $d := toString . -}}
{{- if hasSuffix "ms" $d -}}
{{- trimSuffix "ms" $d | int64 }}
{{- else if hasSuffix "s" $d -}}
{{- mul (trimSuffix "s" $d | int64) 1000 }}
{{- else if hasSuffix "m" $d -}}
{{- mul (trimSuffix "m" $d | int64) 60000 }}
{{- else -}}
{{- fail (printf "cannot read the duration %q (use e.g. 500ms, 3s, 1m)" $d) }}
{{- end }}
{{- end }}

{{/*
The arguments of `serve`: named values first, then extraArgs. Fails on
relations the schema cannot express.
*/}}
{{- define "kserve-injector.serveArgs" -}}
{{- $s := .Values.server -}}
{{- $request := include "kserve-injector.millis" $s.requestTimeout | int64 -}}
{{- $limit := mul .Values.webhook.timeoutSeconds 1000 -}}
{{- if gt (add $request 2000) $limit -}}
{{- fail (printf "server.requestTimeout (%s) must stay at least 2s below webhook.timeoutSeconds (%d): the server answers (504 at the latest) before the API server gives up, with time left for the connection and TLS handshake" $s.requestTimeout (int .Values.webhook.timeoutSeconds)) -}}
{{- end -}}
{{- if and $s.lookupTimeout (ge (include "kserve-injector.millis" $s.lookupTimeout | int64) $request) -}}
{{- fail (printf "server.lookupTimeout (%s) must stay below server.requestTimeout (%s)" $s.lookupTimeout $s.requestTimeout) -}}
{{- end -}}
{{- $named := dict "--request-timeout" "requestTimeout" "--lookup-timeout" "lookupTimeout" "--log-format" "logFormat" "--log" "logLevel" "--shutdown-delay" "shutdownDelay" "--drain-timeout" "drainTimeout" "--max-concurrent-requests" "maxConcurrentRequests" "--max-connections" "maxConnections" "--cluster-lookups" "clusterLookups.enabled" "--watch-kinds" "clusterLookups.watchKinds" "--secret-ttl" "clusterLookups.secretTtl" "--secret-cache-entries" "clusterLookups.secretCacheEntries" "--namespaces" "clusterLookups.namespaces" "--outside-namespaces" "clusterLookups.outsideNamespaces" "--config" "inferenceServiceConfig" "--shadow" "shadow.enabled" "--shadow-warnings" "shadow.warnings" "--modelcar-mode" "modelcarMode" "--kserve-version" "kserveVersion" -}}
{{- range $s.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" . "" -}}
{{- if hasKey $named $flag -}}
{{- fail (printf "server.extraArgs: %s has a value of its own, set %s instead" $flag (get $named $flag)) -}}
{{- end -}}
{{- end -}}
{{- $args := list "serve" "--config=/etc/kserve-injector/config" (printf "--request-timeout=%s" $s.requestTimeout) -}}
{{- $args = append $args (printf "--cluster-lookups=%s" (ternary "on" "off" .Values.clusterLookups.enabled)) -}}
{{- with .Values.clusterLookups.watchKinds -}}
{{- $args = append $args (printf "--watch-kinds=%s" (join "," .)) -}}
{{- end -}}
{{- with .Values.clusterLookups.secretTtl }}{{ $args = append $args (printf "--secret-ttl=%s" .) }}{{ end -}}
{{- with .Values.clusterLookups.secretCacheEntries }}{{ $args = append $args (printf "--secret-cache-entries=%d" (int .)) }}{{ end -}}
{{- with .Values.clusterLookups.namespaces }}{{ $args = append $args (printf "--namespaces=%s" (join "," .)) }}{{ end -}}
{{- with .Values.clusterLookups.outsideNamespaces }}{{ $args = append $args (printf "--outside-namespaces=%s" .) }}{{ end -}}
{{- with $s.lookupTimeout }}{{ $args = append $args (printf "--lookup-timeout=%s" .) }}{{ end -}}
{{- with $s.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end -}}
{{- with $s.logLevel }}{{ $args = append $args (printf "--log=%s" .) }}{{ end -}}
{{- with $s.shutdownDelay }}{{ $args = append $args (printf "--shutdown-delay=%s" .) }}{{ end -}}
{{- with $s.drainTimeout }}{{ $args = append $args (printf "--drain-timeout=%s" .) }}{{ end -}}
{{- with $s.maxConcurrentRequests }}{{ $args = append $args (printf "--max-concurrent-requests=%d" (int .)) }}{{ end -}}
{{- with $s.maxConnections }}{{ $args = append $args (printf "--max-connections=%d" (int .)) }}{{ end -}}
{{- if .Values.shadow.enabled }}{{ $args = append $args "--shadow" }}{{ end -}}
{{- if and .Values.shadow.enabled .Values.shadow.warnings }}{{ $args = append $args "--shadow-warnings" }}{{ end -}}
{{- with $s.modelcarMode }}{{ $args = append $args (printf "--modelcar-mode=%s" .) }}{{ end -}}
{{- with $s.kserveVersion }}{{ $args = append $args (printf "--kserve-version=%s" .) }}{{ end -}}
{{- concat $args $s.extraArgs | toJson }}
{{- end }}

{{/*
certificates.mode=self-signed: the CA and serving pair, generated once per
render (both the Secrets and the webhook's caBundle use them) and reused from
the cluster when they are there:
- the CA (Secret <fullname>-self-signed-ca) is kept as long as it exists, so
  the caBundle never changes on upgrade;
- the serving pair is kept while it was signed by that CA, names the same
  Service and is further than renewDaysBefore from the expiry recorded on
  its Secret; otherwise a new one is signed by the same CA.
`lookup` returns nothing under `helm template` and `--dry-run=client`: every
such render makes a new pair.
*/}}
{{- define "kserve-injector.selfSignedCerts" -}}
{{- if not (hasKey . "kserveInjectorSelfSigned") -}}
{{- $fullname := include "kserve-injector.fullname" . -}}
{{- $cfg := .Values.certificates.selfSigned -}}
{{- $dnsNames := include "kserve-injector.dnsNames" . | fromJsonArray -}}
{{- $layout := "2006-01-02T15:04:05Z07:00" -}}
{{- $caSecret := lookup "v1" "Secret" .Release.Namespace (printf "%s-self-signed-ca" $fullname) -}}
{{- $servingSecret := lookup "v1" "Secret" .Release.Namespace (printf "%s-serving-cert" $fullname) -}}
{{- $ca := dict -}}
{{- $caCrt := "" -}}
{{- $caKey := "" -}}
{{- $caData := dig "data" dict $caSecret -}}
{{- if and (get $caData "tls.crt") (get $caData "tls.key") -}}
{{- $caCrt = get $caData "tls.crt" | b64dec -}}
{{- $caKey = get $caData "tls.key" | b64dec -}}
{{- $ca = buildCustomCert (get $caData "tls.crt") (get $caData "tls.key") -}}
{{- else -}}
{{- $ca = genCA (printf "%s-ca" $fullname) (int $cfg.caValidityDays) -}}
{{- $caCrt = $ca.Cert -}}
{{- $caKey = $ca.Key -}}
{{- end -}}
{{- $crt := "" -}}
{{- $key := "" -}}
{{- $notAfter := "" -}}
{{- $data := dig "data" dict $servingSecret -}}
{{- $annotations := dig "metadata" "annotations" dict $servingSecret -}}
{{- $recorded := get $annotations "kserve-injector.kserve.io/not-after" -}}
{{- $renewAt := now | dateModify (printf "+%dh" (mul (int $cfg.renewDaysBefore) 24)) -}}
{{- if and (get $data "tls.crt") (get $data "tls.key") $recorded
      (eq (get $data "ca.crt" | b64dec) $caCrt)
      (eq (get $annotations "kserve-injector.kserve.io/dns-names") (join "," $dnsNames)) -}}
{{- if gt ((toDate $layout $recorded).Unix) $renewAt.Unix -}}
{{- $crt = get $data "tls.crt" | b64dec -}}
{{- $key = get $data "tls.key" | b64dec -}}
{{- $notAfter = $recorded -}}
{{- end -}}
{{- end -}}
{{- if not $crt -}}
{{- $days := int $cfg.certValidityDays -}}
{{- $pair := genSignedCert (first $dnsNames) nil $dnsNames $days $ca -}}
{{- $crt = $pair.Cert -}}
{{- $key = $pair.Key -}}
{{- $notAfter = dateInZone $layout (now | dateModify (printf "+%dh" (mul $days 24))) "UTC" -}}
{{- end -}}
{{- $_ := set . "kserveInjectorSelfSigned" (dict "caCrt" $caCrt "caKey" $caKey "crt" $crt "key" $key "notAfter" $notAfter "dnsNames" (join "," $dnsNames)) -}}
{{- end -}}
{{- get . "kserveInjectorSelfSigned" | toJson }}
{{- end }}

{{/* The caBundle (base64 PEM) of the self-signed and provided modes. */}}
{{- define "kserve-injector.caBundle" -}}
{{- if eq .Values.certificates.mode "self-signed" -}}
{{- (include "kserve-injector.selfSignedCerts" . | fromJson).caCrt | b64enc }}
{{- else if eq .Values.certificates.mode "provided" -}}
{{- required "certificates.provided.caCrt (PEM of the CA that signed the serving certificate) is required with certificates.mode=provided" .Values.certificates.provided.caCrt | b64enc }}
{{- end }}
{{- end }}

{{- define "kserve-injector.hookImage" -}}
{{- $i := .Values.kserveMutatorHook.image -}}
{{- if $i.digest -}}
{{ $i.repository }}@{{ $i.digest }}
{{- else -}}
{{ $i.repository }}:{{ $i.tag }}
{{- end }}
{{- end }}

{{/* Pod spec fields of the replaceKServeMutator Jobs. */}}
{{- define "kserve-injector.hookPodSpec" -}}
serviceAccountName: {{ .name }}
automountServiceAccountToken: true
restartPolicy: Never
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65534
  seccompProfile:
    type: RuntimeDefault
volumes:
  # kubectl's discovery cache ($HOME/.kube)
  - name: home
    emptyDir: {}
{{- end }}

{{/* Container fields of the replaceKServeMutator Jobs. */}}
{{- define "kserve-injector.hookContainer" -}}
image: {{ include "kserve-injector.hookImage" . }}
imagePullPolicy: {{ .Values.kserveMutatorHook.image.pullPolicy }}
env:
  - name: HOME
    value: /home/kubectl
{{- with .Values.kserveMutatorHook.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
volumeMounts:
  - name: home
    mountPath: /home/kubectl
{{- end }}

{{/*
shadow.enabled: checks the release can run beside KServe's mutator. The API
server calls MutatingWebhookConfigurations in name order, so ours must sort
after KServe's to see the pods it mutated; and KServe's mutator must stay.
*/}}
{{- define "kserve-injector.shadowChecks" -}}
{{- if .Values.shadow.enabled -}}
{{- $name := include "kserve-injector.fullname" . -}}
{{- $kserve := .Values.kserveMutatorHook.configuration -}}
{{- if .Values.replaceKServeMutator -}}
{{- fail "shadow.enabled runs beside KServe's pod mutator: it cannot be combined with replaceKServeMutator" -}}
{{- end -}}
{{- if not (lt $kserve $name) -}}
{{- fail (printf "shadow.enabled: the MutatingWebhookConfiguration %q sorts before KServe's %q, so the API server would call it first and it would not see KServe's result; choose a release name or fullnameOverride that sorts after it (kserve-injector does)" $name $kserve) -}}
{{- end -}}
{{- end -}}
{{- end }}
