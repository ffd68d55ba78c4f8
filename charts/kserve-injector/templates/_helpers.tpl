{{/*
A name or label value of at most 63 characters (the limit of a label value
and of most object names): (list base suffix) gives "<base>-<suffix>" when
it fits; otherwise base is cut and 8 hex digits of the whole name's sha256
keep it distinct, before the suffix, which stays readable.
*/}}
{{- define "kserve-injector.fit" -}}
{{- $base := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $whole := $base -}}
{{- if $suffix }}{{ $whole = printf "%s-%s" $base $suffix }}{{ end -}}
{{- if le (len $whole) 63 -}}
{{- $whole }}
{{- else -}}
{{- $tail := sha256sum $whole | trunc 8 -}}
{{- if $suffix }}{{ $tail = printf "%s-%s" $tail $suffix }}{{ end -}}
{{- $cut := regexReplaceAll "-+$" (trunc (int (sub 62 (len $tail))) $base) "" -}}
{{- printf "%s-%s" $cut $tail }}
{{- end -}}
{{- end }}

{{/* The app.kubernetes.io/name label: the chart's name. */}}
{{- define "kserve-injector.name" -}}
{{- include "kserve-injector.fit" (list (default .Chart.Name .Values.nameOverride) "") }}
{{- end }}

{{/*
Object names: "kserve-injector" whatever the release is called, as in the
kustomize install (the webhook configuration and ClusterRole are cluster-wide).
The release name is not part of it.
*/}}
{{- define "kserve-injector.fullname" -}}
{{- include "kserve-injector.fit" (list (default "kserve-injector" .Values.fullnameOverride) "") }}
{{- end }}

{{/* (list . "suffix"): "<fullname>-<suffix>", at most 63 characters. */}}
{{- define "kserve-injector.named" -}}
{{- include "kserve-injector.fit" (list (include "kserve-injector.fullname" (index . 0)) (index . 1)) }}
{{- end }}

{{- define "kserve-injector.serviceAccountName" -}}
{{- default (include "kserve-injector.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The serving Secret the pods mount. */}}
{{- define "kserve-injector.servingSecret" -}}
{{- if and (eq .Values.certificates.mode "provided") .Values.certificates.provided.existingSecret -}}
{{- .Values.certificates.provided.existingSecret }}
{{- else -}}
{{- include "kserve-injector.named" (list . "serving-cert") }}
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
{{- $names := list $svc (printf "%s.cluster.local" $svc) -}}
{{- $host := include "kserve-injector.urlHost" . -}}
{{- if and $host (not (regexMatch "^[0-9.]+$|:" $host)) }}{{ $names = append $names $host | uniq }}{{ end -}}
{{- $names | toJson }}
{{- end }}

{{/* The IP address of webhook.url's host, when it is one (JSON list). */}}
{{- define "kserve-injector.ipAddresses" -}}
{{- $host := include "kserve-injector.urlHost" . -}}
{{- if and $host (regexMatch "^[0-9.]+$|:" $host) }}{{ list $host | toJson }}{{ else }}{{ list | toJson }}{{ end -}}
{{- end }}

{{/* webhook.url's host, without its port or brackets; empty without a URL. */}}
{{- define "kserve-injector.urlHost" -}}
{{- with .Values.webhook.url -}}
{{- $authority := regexReplaceAll "^https://([^/]+).*$" . "${1}" -}}
{{- if hasPrefix "[" $authority -}}
{{- regexReplaceAll "^\\[([^\\]]+)\\].*$" $authority "${1}" -}}
{{- else -}}
{{- regexReplaceAll ":[0-9]+$" $authority "" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The kinds of clusterLookups.watch that are true, in the server's order (JSON list). */}}
{{- define "kserve-injector.watchKinds" -}}
{{- $watch := .Values.clusterLookups.watch -}}
{{- $kinds := list -}}
{{- range list "serviceaccounts" "secrets" "clusterstoragecontainers" "inferenceservices" -}}
{{- if get $watch . }}{{ $kinds = append $kinds . }}{{ end -}}
{{- end -}}
{{- toJson $kinds }}
{{- end }}

{{/* `serve --watch-kinds`'s default (JSON list). */}}
{{- define "kserve-injector.defaultWatchKinds" -}}
{{- list "serviceaccounts" "clusterstoragecontainers" "inferenceservices" | toJson }}
{{- end }}

{{/*
Flags of `serve` that server.extraArgs may not set, and what to do instead:
those the chart sets from a named value, and those its objects depend on
(the container ports and probes, the mounted certificate, the cluster).
*/}}
{{- define "kserve-injector.reservedFlags" -}}
{{- $ports := "set ports.webhook and ports.admin instead, which the Service, probes and NetworkPolicy follow" -}}
{{- $cert := "the chart mounts the serving certificate at the default --cert-dir; see certificates.mode" -}}
{{- $named := dict "--request-timeout" "set server.requestTimeout instead" "--lookup-timeout" "set server.lookupTimeout instead" "--log-format" "set server.logFormat instead" "--log" "set server.logLevel instead" "--shutdown-delay" "set server.shutdownDelay instead" "--drain-timeout" "set server.drainTimeout instead" "--max-concurrent-requests" "set server.maxConcurrentRequests instead" "--max-connections" "set server.maxConnections instead" "--tls-min-version" "set server.tlsMinVersion instead" "--tls-cipher-suites" "set server.tlsCipherSuites instead" "--modelcar-mode" "set server.modelcarMode instead" "--kserve-version" "set server.kserveVersion instead" -}}
{{- $_ := merge $named (dict "--cluster-lookups" "set clusterLookups.enabled instead" "--watch-kinds" "set clusterLookups.watch instead" "--secret-ttl" "set clusterLookups.secretTtl instead" "--secret-cache-entries" "set clusterLookups.secretCacheEntries instead" "--namespaces" "set clusterLookups.namespaces instead" "--outside-namespaces" "set clusterLookups.outsideNamespaces instead" "--config" "set inferenceServiceConfig instead" "--shadow" "set shadow.enabled instead" "--shadow-warnings" "set shadow.warnings instead") -}}
{{- $_ = merge $named (dict "--security-profile" "set server.securityProfile instead" "--config-file" "set settings instead") -}}
{{- $_ = merge $named (dict "--addr" $ports "--admin-addr" $ports "--cert-dir" $cert "--tls-cert-file" $cert "--tls-key-file" $cert "--self-signed" $cert "--dns-name" $cert "--self-signed-ca-file" $cert "--objects" "the chart runs the server against the cluster (clusterLookups)" "--kubeconfig" "the server uses its ServiceAccount in the cluster" "--context" "the server uses its ServiceAccount in the cluster") -}}
{{- toJson $named }}
{{- end }}

{{/*
server.extraArgs, checked: each item is a flag (--name or --name=value) or
the value of the flag before it; a reserved flag is refused by name.
*/}}
{{- define "kserve-injector.extraArgs" -}}
{{- $reserved := include "kserve-injector.reservedFlags" . | fromJson -}}
{{- $valueMayFollow := false -}}
{{- range .Values.server.extraArgs -}}
{{- if hasPrefix "--" . -}}
{{- $flag := regexReplaceAll "[= ].*$" . "" -}}
{{- if hasKey $reserved $flag -}}
{{- fail (printf "server.extraArgs: %s is set by the chart: %s" $flag (get $reserved $flag)) -}}
{{- end -}}
{{- if and (contains " " .) (not (contains "=" .)) -}}
{{- fail (printf "server.extraArgs: %q is one argument with a space in it, which serve does not split: write %s=VALUE, or the flag and its value as two items" . $flag) -}}
{{- end -}}
{{- $valueMayFollow = not (contains "=" .) -}}
{{- else if $valueMayFollow -}}
{{- $valueMayFollow = false -}}
{{- else -}}
{{- fail (printf "server.extraArgs: %q is neither a flag (--name, --name=value) nor the value of the flag before it" .) -}}
{{- end -}}
{{- end -}}
{{- toJson .Values.server.extraArgs }}
{{- end }}

{{/*
The arguments of `serve`: named values first, then extraArgs. The checks on
their values are in _checks.tpl.
*/}}
{{- define "kserve-injector.serveArgs" -}}
{{- $s := .Values.server -}}
{{- $l := .Values.clusterLookups -}}
{{- $args := list "serve" "--config=/etc/kserve-injector/config" (printf "--request-timeout=%s" $s.requestTimeout) -}}
{{- $args = append $args (printf "--cluster-lookups=%s" (ternary "on" "off" $l.enabled)) -}}
{{- if ne (int .Values.ports.webhook) 9443 }}{{ $args = append $args (printf "--addr=0.0.0.0:%d" (int .Values.ports.webhook)) }}{{ end -}}
{{- if ne (int .Values.ports.admin) 8081 }}{{ $args = append $args (printf "--admin-addr=0.0.0.0:%d" (int .Values.ports.admin)) }}{{ end -}}
{{- if $l.enabled -}}
{{- $kinds := include "kserve-injector.watchKinds" . | fromJsonArray -}}
{{- if ne (join "," $kinds) (include "kserve-injector.defaultWatchKinds" . | fromJsonArray | join ",") -}}
{{- $args = append $args (printf "--watch-kinds=%s" (join "," $kinds)) -}}
{{- end -}}
{{- with $l.secretTtl }}{{ $args = append $args (printf "--secret-ttl=%s" .) }}{{ end -}}
{{- with $l.secretCacheEntries }}{{ $args = append $args (printf "--secret-cache-entries=%d" (int .)) }}{{ end -}}
{{- with $l.namespaces }}{{ $args = append $args (printf "--namespaces=%s" (join "," .)) }}{{ end -}}
{{- with $l.outsideNamespaces }}{{ $args = append $args (printf "--outside-namespaces=%s" .) }}{{ end -}}
{{- with $s.lookupTimeout }}{{ $args = append $args (printf "--lookup-timeout=%s" .) }}{{ end -}}
{{- end -}}
{{- with $s.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end -}}
{{- with $s.logLevel }}{{ $args = append $args (printf "--log=%s" .) }}{{ end -}}
{{- with $s.shutdownDelay }}{{ $args = append $args (printf "--shutdown-delay=%s" .) }}{{ end -}}
{{- with $s.drainTimeout }}{{ $args = append $args (printf "--drain-timeout=%s" .) }}{{ end -}}
{{- with $s.maxConcurrentRequests }}{{ $args = append $args (printf "--max-concurrent-requests=%d" (int .)) }}{{ end -}}
{{- with $s.maxConnections }}{{ $args = append $args (printf "--max-connections=%d" (int .)) }}{{ end -}}
{{- with $s.tlsMinVersion }}{{ $args = append $args (printf "--tls-min-version=%s" .) }}{{ end -}}
{{- with $s.tlsCipherSuites }}{{ $args = append $args (printf "--tls-cipher-suites=%s" (join "," .)) }}{{ end -}}
{{- if .Values.shadow.enabled }}{{ $args = append $args "--shadow" }}{{ end -}}
{{- if and .Values.shadow.enabled .Values.shadow.warnings }}{{ $args = append $args "--shadow-warnings" }}{{ end -}}
{{- with $s.modelcarMode }}{{ $args = append $args (printf "--modelcar-mode=%s" .) }}{{ end -}}
{{- with $s.kserveVersion }}{{ $args = append $args (printf "--kserve-version=%s" .) }}{{ end -}}
{{- with $s.securityProfile }}{{ $args = append $args (printf "--security-profile=%s" .) }}{{ end -}}
{{- if .Values.settings }}{{ $args = append $args "--config-file=/etc/kserve-injector/settings/settings.yaml" }}{{ end -}}
{{- concat $args (include "kserve-injector.extraArgs" . | fromJsonArray) | toJson }}
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
{{- $caSecret := lookup "v1" "Secret" .Release.Namespace (include "kserve-injector.named" (list . "self-signed-ca")) -}}
{{- $servingSecret := lookup "v1" "Secret" .Release.Namespace (include "kserve-injector.named" (list . "serving-cert")) -}}
{{- $ca := dict -}}
{{- $caCrt := "" -}}
{{- $caKey := "" -}}
{{- $caData := dig "data" dict $caSecret -}}
{{- if and (get $caData "tls.crt") (get $caData "tls.key") -}}
{{- $caCrt = get $caData "tls.crt" | b64dec -}}
{{- $caKey = get $caData "tls.key" | b64dec -}}
{{- $ca = buildCustomCert (get $caData "tls.crt") (get $caData "tls.key") -}}
{{- else -}}
{{- $ca = genCA (include "kserve-injector.named" (list . "ca")) (int $cfg.caValidityDays) -}}
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
{{- $pair := genSignedCert (first $dnsNames) (include "kserve-injector.ipAddresses" . | fromJsonArray) $dnsNames $days $ca -}}
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
The ConfigMap of our own settings (values `settings`, `--config-file`),
named after a hash of its content, so changed settings roll the pods.
*/}}
{{- define "kserve-injector.settingsConfigMap" -}}
{{- include "kserve-injector.named" (list . (printf "settings-%s" (toYaml .Values.settings | sha256sum | trunc 8))) }}
{{- end }}

{{/*
(list $prometheusRule "anchor"): an alert's runbook_url annotation, the
absolute metrics.prometheusRule.runbookUrl plus "#anchor"; nothing while
runbookUrl is empty (NOTES.txt says to set it).
*/}}
{{- define "kserve-injector.runbook" -}}
{{- with (index . 0).runbookUrl }}
{{ printf "runbook_url: %s" (printf "%s#%s" . (index $ 1) | quote) | indent 12 }}
{{- end }}
{{- end }}
