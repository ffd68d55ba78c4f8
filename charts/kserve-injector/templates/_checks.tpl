{{/*
What values.schema.json cannot express: relations between values, values
Helm turned into nothing (null), and contradictions. Each refusal names the
values to change. Included once, from webhook.yaml.
*/}}
{{- define "kserve-injector.checks" -}}
{{- include "kserve-injector.timeoutChecks" . -}}
{{- include "kserve-injector.selectorChecks" . -}}
{{- include "kserve-injector.lookupChecks" . -}}
{{- include "kserve-injector.shadowChecks" . -}}
{{- include "kserve-injector.certificateChecks" . -}}
{{- include "kserve-injector.alertChecks" . -}}
{{- include "kserve-injector.podChecks" . -}}
{{- include "kserve-injector.networkChecks" . -}}
{{- end }}

{{/*
extraEnv, extraVolumes and extraVolumeMounts against what the chart sets:
a second POD_NAMESPACE or volume of the same name is refused by the API
server only at install, a KSERVE_INJECTOR_* variable would set a serve flag
past the checks of server.extraArgs, and a mount over the chart's own hides
the certificate or the config.
*/}}
{{- define "kserve-injector.podChecks" -}}
{{- range .Values.extraEnv -}}
{{- if eq .name "POD_NAMESPACE" -}}
{{- fail "extraEnv: POD_NAMESPACE is set by the chart (the release namespace, from the pod's metadata)" -}}
{{- end -}}
{{- if hasPrefix "KSERVE_INJECTOR_" .name -}}
{{- fail (printf "extraEnv: %s would set a serve flag past the chart's checks; give the flag as its value (server.*, clusterLookups.*) or in server.extraArgs" .name) -}}
{{- end -}}
{{- end -}}
{{- $volumes := list "serving-cert" "config" -}}
{{- if .Values.settings }}{{ $volumes = append $volumes "settings" }}{{ end -}}
{{- range .Values.extraVolumes -}}
{{- if has .name (list "serving-cert" "config" "settings") -}}
{{- fail (printf "extraVolumes: the name %s is the chart's own volume; give yours another name" .name) -}}
{{- end -}}
{{- $volumes = append $volumes .name -}}
{{- end -}}
{{- range .Values.extraVolumeMounts -}}
{{- if not (has .name $volumes) -}}
{{- fail (printf "extraVolumeMounts: %s mounts the volume %s, which is neither in extraVolumes nor one of the chart's (%s)" .mountPath .name (join ", " $volumes)) -}}
{{- end -}}
{{- $path := trimSuffix "/" .mountPath -}}
{{- range list "/tmp/k8s-webhook-server" "/etc/kserve-injector" -}}
{{- if or (eq $path .) (hasPrefix (printf "%s/" .) $path) (hasPrefix (printf "%s/" $path) .) -}}
{{- fail (printf "extraVolumeMounts: %s is on a path the chart mounts (%s: the serving certificate, the config and the settings); mount elsewhere" $path .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Alert thresholds that contradict each other or the webhook's timeout. */}}
{{- define "kserve-injector.alertChecks" -}}
{{- $r := .Values.metrics.prometheusRule -}}
{{- if $r.enabled -}}
{{- $t := $r.thresholds -}}
{{- /* --set gives 2.5 as the text "2.5", which the schema takes too */ -}}
{{- range $name := list "latencyP99Seconds" "certificateWarningDays" "certificateCriticalDays" -}}
{{- if le (float64 (index $t $name)) 0.0 -}}
{{- fail (printf "metrics.prometheusRule.thresholds.%s (%v) must be greater than zero" $name (index $t $name)) -}}
{{- end -}}
{{- end -}}
{{- if ge (float64 $t.latencyP99Seconds) (float64 .Values.webhook.timeoutSeconds) -}}
{{- fail (printf "metrics.prometheusRule.thresholds.latencyP99Seconds (%v) must stay below webhook.timeoutSeconds (%v): the API server has given up on a request by then, so the alert would come after the failures" $t.latencyP99Seconds .Values.webhook.timeoutSeconds) -}}
{{- end -}}
{{- if ge (float64 $t.certificateCriticalDays) (float64 $t.certificateWarningDays) -}}
{{- fail (printf "metrics.prometheusRule.thresholds.certificateCriticalDays (%v) must be fewer than certificateWarningDays (%v): the warning comes first" $t.certificateCriticalDays $t.certificateWarningDays) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The server's timeouts against each other and against the API server's and
the kubelet's, on the values the server will run with (its defaults where
a value is null).
*/}}
{{- define "kserve-injector.timeoutChecks" -}}
{{- $s := .Values.server -}}
{{- $_ := required "server.requestTimeout is null: give the server's budget for one request, below webhook.timeoutSeconds (default 3s)" $s.requestTimeout -}}
{{- $request := include "kserve-injector.nonZeroDuration" (list "server.requestTimeout" $s.requestTimeout) | fromJson -}}
{{- $limit := int64 .Values.webhook.timeoutSeconds -}}
{{- $budget := dict "s" (add $request.s 2) "ns" $request.ns -}}
{{- if gt (include "kserve-injector.durationKey" $budget) (include "kserve-injector.durationKey" (dict "s" $limit "ns" 0)) -}}
{{- fail (printf "server.requestTimeout (%s) must stay at least 2s below webhook.timeoutSeconds (%d): the server answers (504 at the latest) before the API server gives up, with time left for the connection and TLS handshake; lower server.requestTimeout or raise webhook.timeoutSeconds" $s.requestTimeout $limit) -}}
{{- end -}}
{{- if .Values.clusterLookups.enabled -}}
{{- $lookupText := default "2s" $s.lookupTimeout -}}
{{- $lookup := include "kserve-injector.nonZeroDuration" (list "server.lookupTimeout" $lookupText) | fromJson -}}
{{- if ge (include "kserve-injector.durationKey" $lookup) (include "kserve-injector.durationKey" $request) -}}
{{- $shown := ternary $lookupText "null: the server's 2s" (not (kindIs "invalid" $s.lookupTimeout)) -}}
{{- fail (printf "server.lookupTimeout (%s) must stay below server.requestTimeout (%s), or serve refuses to start: lower server.lookupTimeout or raise server.requestTimeout" $shown $s.requestTimeout) -}}
{{- end -}}
{{- with .Values.clusterLookups.secretTtl -}}
{{- $_ := include "kserve-injector.nonZeroDuration" (list "clusterLookups.secretTtl" .) -}}
{{- end -}}
{{- end -}}
{{- $delayText := default "5s" $s.shutdownDelay -}}
{{- $drainText := default "20s" $s.drainTimeout -}}
{{- $delay := include "kserve-injector.duration" (list "server.shutdownDelay" $delayText) | fromJson -}}
{{- $drain := include "kserve-injector.duration" (list "server.drainTimeout" $drainText) | fromJson -}}
{{- $ns := add $delay.ns $drain.ns -}}
{{- $total := add 5 $delay.s $drain.s (div $ns 1000000000) -}}
{{- $grace := int64 .Values.terminationGracePeriodSeconds -}}
{{- if ge $total $grace -}}
{{- fail (printf "the preStop sleep (5s) + server.shutdownDelay (%s) + server.drainTimeout (%s) must stay below terminationGracePeriodSeconds (%d), or the kubelet kills the pod with requests in flight: raise terminationGracePeriodSeconds or lower server.shutdownDelay / server.drainTimeout (null: the server's 5s / 20s)" $delayText $drainText $grace) -}}
{{- end -}}
{{- end }}

{{/*
Helm drops a value set to null, so a null selector arrives as a missing key:
the webhook would render without it.
*/}}
{{- define "kserve-injector.selectorChecks" -}}
{{- $w := .Values.webhook -}}
{{- if not (hasKey $w "namespaceSelector") -}}
{{- fail "webhook.namespaceSelector is null: give a selector, or, for no namespace condition of your own, set webhook.namespaceSelector.matchExpressions=null (webhook.excludedNamespaces and the release namespace are excluded regardless)" -}}
{{- end -}}
{{- if not (hasKey $w "objectSelector") -}}
{{- fail "webhook.objectSelector is null, which would send every pod in the cluster to the webhook (failurePolicy Fail): keep the default (InferenceService pods only), or, to mean every pod, set webhook.objectSelector.matchExpressions=null" -}}
{{- end -}}
{{- if not (kindIs "slice" $w.excludedNamespaces) -}}
{{- fail "webhook.excludedNamespaces is null: give a list of namespaces, or [] for none besides the release namespace (always excluded)" -}}
{{- end -}}
{{- end }}

{{/* Cluster lookup values that contradict each other or the webhook's scope. */}}
{{- define "kserve-injector.lookupChecks" -}}
{{- $l := .Values.clusterLookups -}}
{{- if not (kindIs "map" $l.watch) -}}
{{- fail "clusterLookups.watch is null: keep the map (a switch per kind), e.g. clusterLookups.watch.secrets=true" -}}
{{- end -}}
{{- if $l.watchKinds -}}
{{- fail "clusterLookups.watchKinds is replaced by clusterLookups.watch, a switch per kind on top of the defaults (watchKinds replaced the server's whole list): e.g. clusterLookups.watch.secrets=true to add the Secret watch" -}}
{{- end -}}
{{- if $l.enabled -}}
{{- if not (include "kserve-injector.watchKinds" . | fromJsonArray) -}}
{{- fail "clusterLookups.watch: every kind is false, which serve --watch-kinds cannot express; keep at least one kind watched" -}}
{{- end -}}
{{- if and $l.outsideNamespaces (not $l.namespaces) -}}
{{- fail (printf "clusterLookups.outsideNamespaces (%s) applies only with clusterLookups.namespaces: set the namespaces, or leave outsideNamespaces empty" $l.outsideNamespaces) -}}
{{- end -}}
{{- $excluded := append .Values.webhook.excludedNamespaces .Release.Namespace -}}
{{- range $l.namespaces -}}
{{- if has . $excluded -}}
{{- $why := ternary "the release namespace, which the webhook never serves" "a namespace of webhook.excludedNamespaces, whose pods the webhook never sees" (eq . $.Release.Namespace) -}}
{{- fail (printf "clusterLookups.namespaces lists %s, %s: its Role would let the webhook read Secrets there for no pod. Remove it from clusterLookups.namespaces (or from webhook.excludedNamespaces)" . $why) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $set := list -}}
{{- if ne (include "kserve-injector.watchKinds" . | fromJsonArray | join ",") (include "kserve-injector.defaultWatchKinds" . | fromJsonArray | join ",") }}{{ $set = append $set "clusterLookups.watch" }}{{ end -}}
{{- if $l.namespaces }}{{ $set = append $set "clusterLookups.namespaces" }}{{ end -}}
{{- if $l.outsideNamespaces }}{{ $set = append $set "clusterLookups.outsideNamespaces" }}{{ end -}}
{{- if $l.secretTtl }}{{ $set = append $set "clusterLookups.secretTtl" }}{{ end -}}
{{- if $l.secretCacheEntries }}{{ $set = append $set "clusterLookups.secretCacheEntries" }}{{ end -}}
{{- if not (kindIs "invalid" .Values.server.lookupTimeout) }}{{ $set = append $set "server.lookupTimeout" }}{{ end -}}
{{- with $set -}}
{{- fail (printf "clusterLookups.enabled is false, so %s would do nothing: set clusterLookups.enabled=true, or leave %s at the default" (join ", " .) (ternary "them" "it" (gt (len .) 1))) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
shadow.enabled: checks the release can run beside KServe's mutator. The API
server calls MutatingWebhookConfigurations in name order, so ours must sort
after KServe's to see the pods it mutated; KServe's mutator must stay; and
reinvocation must be on, as components/shadow requires. The configuration's
name is the fullname, which the release name does not change.
*/}}
{{- define "kserve-injector.shadowChecks" -}}
{{- if .Values.shadow.enabled -}}
{{- $name := include "kserve-injector.fullname" . -}}
{{- $kserve := .Values.kserveMutatorHook.configuration -}}
{{- if .Values.replaceKServeMutator -}}
{{- fail "shadow.enabled runs beside KServe's pod mutator: it cannot be combined with replaceKServeMutator; set one of them to false" -}}
{{- end -}}
{{- if ne .Values.webhook.reinvocationPolicy "IfNeeded" -}}
{{- fail "shadow.enabled needs webhook.reinvocationPolicy=IfNeeded, so that it sees the pod as KServe's mutator left it (components/shadow requires the same): set webhook.reinvocationPolicy=IfNeeded, or shadow.enabled=false" -}}
{{- end -}}
{{- if not (lt $kserve $name) -}}
{{- fail (printf "shadow.enabled: the MutatingWebhookConfiguration %q sorts before KServe's %q, so the API server would call it first and it would not see KServe's result; set fullnameOverride to a name that sorts after it, or leave it empty (kserve-injector does)" $name $kserve) -}}
{{- end -}}
{{- else if .Values.shadow.warnings -}}
{{- fail "shadow.warnings=true reports shadow mode's differences, but shadow.enabled is false: set shadow.enabled=true, or shadow.warnings=false" -}}
{{- end -}}
{{- end }}

{{/*
Certificates: cert-manager's issuerRef needs a name; provided certificates
are parsed (Sprig's buildCustomCert reads the X.509 certificate and the
key), and the serving certificate must name the Service as the API server
calls it: tlsCrt, or the tls.crt of existingSecret when lookup finds it
(helm install/upgrade; `helm template` reads no Secret). Helm has no
function that returns a certificate's names, so they are looked for in the
certificate's DER: a subjectAltName dNSName is the byte 0x82, the name's
length and the name. Whether the serving certificate chains to caCrt, Helm
cannot check.
*/}}
{{- define "kserve-injector.certificateChecks" -}}
{{- $c := .Values.certificates -}}
{{- if eq $c.mode "cert-manager" -}}
{{- with $c.certManager.issuerRef -}}
{{- if not .name -}}
{{- fail "certificates.certManager.issuerRef.name is required when issuerRef is set (e.g. {kind: ClusterIssuer, name: my-ca}); leave issuerRef empty for the chart's own CA" -}}
{{- end -}}
{{- end -}}
{{- else if eq $c.mode "provided" -}}
{{- $p := $c.provided -}}
{{- $_ := required "certificates.provided.caCrt (PEM of the CA that signed the serving certificate) is required with certificates.mode=provided" $p.caCrt -}}
{{- if not $p.existingSecret -}}
{{- if not (and $p.tlsCrt $p.tlsKey) -}}
{{- fail "certificates.mode=provided needs certificates.provided.existingSecret, or tlsCrt and tlsKey (PEM, e.g. --set-file certificates.provided.tlsCrt=certs/tls.crt)" -}}
{{- end -}}
{{- else if or $p.tlsCrt $p.tlsKey -}}
{{- fail "certificates.provided: existingSecret and tlsCrt/tlsKey exclude each other" -}}
{{- end -}}
{{- $ca := include "kserve-injector.pemCertificate" (list "certificates.provided.caCrt" $p.caCrt) -}}
{{- $_ = buildCustomCert (b64enc $ca) (genPrivateKey "ecdsa" | b64enc) -}}
{{- if $p.tlsCrt -}}
{{- $crt := include "kserve-injector.pemCertificate" (list "certificates.provided.tlsCrt" $p.tlsCrt) -}}
{{- if not (contains "PRIVATE KEY-----" (toString $p.tlsKey)) -}}
{{- fail "certificates.provided.tlsKey is not a PEM private key (-----BEGIN ... PRIVATE KEY-----): give the serving certificate's key, e.g. --set-file certificates.provided.tlsKey=certs/tls.key" -}}
{{- end -}}
{{- $_ = buildCustomCert (b64enc $p.tlsCrt) (b64enc $p.tlsKey) -}}
{{- include "kserve-injector.namesService" (list . "certificates.provided.tlsCrt" $crt) -}}
{{- end -}}
{{- with $p.existingSecret -}}
{{- $found := lookup "v1" "Secret" $.Release.Namespace . -}}
{{- $crt := dig "data" "tls.crt" "" $found | b64dec -}}
{{- if $crt -}}
{{- $what := printf "the tls.crt of the Secret %s/%s (certificates.provided.existingSecret)" $.Release.Namespace . -}}
{{- include "kserve-injector.namesService" (list $ $what $crt) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "kserve-injector.modeSwitchCheck" . -}}
{{- end }}

{{/*
(list . "what" $pem): fails unless the certificate names the Service as the
API server calls it, <fullname>.<namespace>.svc, or *.<namespace>.svc.
*/}}
{{- define "kserve-injector.namesService" -}}
{{- $root := index . 0 -}}
{{- $what := index . 1 -}}
{{- $host := include "kserve-injector.dnsNames" $root | fromJsonArray | first -}}
{{- $der := regexReplaceAll "(?s)^.*-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----.*$" (index . 2) "${1}" | nospace | b64dec -}}
{{- $wildcard := regexReplaceAll "^[^.]+" $host "*" -}}
{{- if not (or (contains (include "kserve-injector.dnsNameDer" $host) $der) (contains (include "kserve-injector.dnsNameDer" $wildcard) $der)) -}}
{{- $svc := include "kserve-injector.fullname" $root -}}
{{- fail (printf "%s does not name %s, the name the API server calls the webhook by (the Service %s in namespace %s): make it for that name, e.g. kserve-injector certs --service %s --namespace %s" $what $host $svc $root.Release.Namespace $svc $root.Release.Namespace) -}}
{{- end -}}
{{- end }}

{{/*
(list "values.path" $text): the first PEM certificate block of text, or a
failure naming the value. The base64 is checked here, so that a bad value
gets this message rather than a decoder's.
*/}}
{{- define "kserve-injector.pemCertificate" -}}
{{- $name := index . 0 -}}
{{- $text := toString (index . 1) -}}
{{- $block := regexFind "(?s)-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\\s]*-----END CERTIFICATE-----" $text -}}
{{- $body := $block | trimPrefix "-----BEGIN CERTIFICATE-----" | trimSuffix "-----END CERTIFICATE-----" | nospace -}}
{{- if or (not $body) (ne (mod (len $body) 4) 0) (not (regexMatch "^[A-Za-z0-9+/]+={0,2}$" $body)) -}}
{{- fail (printf "%s is not a PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----); pass the file with --set-file %s=PATH" $name $name) -}}
{{- end -}}
{{- $block }}
{{- end }}

{{/* A DNS name as a subjectAltName dNSName in DER: 0x82, the length, the name. */}}
{{- define "kserve-injector.dnsNameDer" -}}
{{- $n := len . -}}
{{- $length := printf "%c" $n -}}
{{- if ge $n 128 }}{{ $length = printf "%s%s" (include "kserve-injector.byte" 129) (include "kserve-injector.byte" $n) }}{{ end -}}
{{- printf "%s%s%s" (include "kserve-injector.byte" 130) $length . }}
{{- end }}

{{/* One byte of any value 0-255 (printf "%c" writes UTF-8 above 127): its base64, decoded. */}}
{{- define "kserve-injector.byte" -}}
{{- $alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" -}}
{{- $hi := div . 4 -}}
{{- $lo := mul (mod . 4) 16 -}}
{{- printf "%s%s==" (substr (int $hi) (int (add1 $hi)) $alphabet) (substr (int $lo) (int (add1 $lo)) $alphabet) | b64dec }}
{{- end }}

{{/*
Switching certificates.mode on upgrade. In cert-manager mode, cert-manager
creates the serving Secret; self-signed and provided render a Secret of the
same name for Helm to own, and Helm refuses to adopt one it did not create
("exists and cannot be imported"). Found with lookup (helm install/upgrade,
--dry-run=server; `helm template` looks nothing up), such a Secret stops the
upgrade before anything changes, with the way through.
*/}}
{{- define "kserve-injector.modeSwitchCheck" -}}
{{- $p := .Values.certificates.provided -}}
{{- if or (eq .Values.certificates.mode "self-signed") (and (eq .Values.certificates.mode "provided") (not $p.existingSecret)) -}}
{{- $name := include "kserve-injector.named" (list . "serving-cert") -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- if $found -}}
{{- $annotations := dig "metadata" "annotations" dict $found -}}
{{- $release := get $annotations "meta.helm.sh/release-name" -}}
{{- $releaseNamespace := get $annotations "meta.helm.sh/release-namespace" -}}
{{- if not (and (eq $release .Release.Name) (eq $releaseNamespace .Release.Namespace)) -}}
{{- $issuer := get $annotations "cert-manager.io/certificate-name" -}}
{{- $owner := ternary (printf "cert-manager made it for the Certificate %s (certificates.mode=cert-manager)" $issuer) "it does not belong to this release" (ne $issuer "") -}}
{{- fail (printf "certificates.mode=%s renders the Secret %s/%s, which exists and %s; Helm cannot take it over. Switch in two steps: kubectl -n %s delete certificate %s --ignore-not-found && kubectl -n %s delete secret %s, then run this upgrade again (the running pods keep the certificate they loaded). Or keep certificates.mode=cert-manager, or use certificates.provided.existingSecret (docs/helm.md, \"Switching certificates.mode\")" .Values.certificates.mode .Release.Namespace $name $owner .Release.Namespace (include "kserve-injector.named" (list . "serving")) .Release.Namespace $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The ports and the host network: two listeners on one port cannot both
bind, and on the node's network a port the kubelet, kube-proxy or the
control plane listens on is taken already.
*/}}
{{- define "kserve-injector.networkChecks" -}}
{{- $p := .Values.ports -}}
{{- if eq (int $p.webhook) (int $p.admin) -}}
{{- fail (printf "ports.webhook and ports.admin are both %d: serve's two listeners need two ports" (int $p.webhook)) -}}
{{- end -}}
{{- if .Values.hostNetwork -}}
{{- $taken := dict "2379" "etcd" "2380" "etcd" "6443" "the API server" "10248" "the kubelet" "10249" "kube-proxy" "10250" "the kubelet" "10255" "the kubelet" "10256" "kube-proxy" "10257" "kube-controller-manager" "10259" "kube-scheduler" -}}
{{- range $what, $port := dict "ports.webhook" $p.webhook "ports.admin" $p.admin -}}
{{- with get $taken (toString (int $port)) -}}
{{- fail (printf "%s (%d) is %s's port on every node: with hostNetwork, pick a free one (e.g. 10260 and 10261)" $what (int $port) .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}
