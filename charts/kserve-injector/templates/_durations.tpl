{{/*
Durations of `serve`'s flags. The server reads them with humantime; the
chart takes the spelling Go (and so Kubernetes and cert-manager) uses, which
humantime reads the same way: numbers with ns, us, µs, ms, s, m or h, joined
without spaces (500ms, 3s, 1m30s), with decimals (1.5s). A value humantime
would refuse is refused here too: a fraction of a nanosecond, and a
fraction that is no whole number of nanoseconds (of seconds for hours:
0.001h). Up to 12 digits before and 6 after the point keep the sums inside
int64.

(list "values.path" $value) -> JSON {"s": whole seconds, "ns": the rest in
nanoseconds}; fails naming the value.
*/}}
{{- define "kserve-injector.duration" -}}
{{- $name := index . 0 -}}
{{- $text := toString (index . 1) -}}
{{- $part := "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" -}}
{{- if not (regexMatch (printf "^(%s)+$" $part) $text) -}}
{{- fail (printf "%s: %q is not a duration: write numbers with a unit (ns, us, ms, s, m, h), e.g. 500ms, 3s, 1m30s" $name $text) -}}
{{- end -}}
{{- $sec := 0 -}}
{{- $ns := 0 -}}
{{- range regexFindAll $part $text -1 -}}
{{- $unit := regexFind "[a-zµ]+$" . -}}
{{- $whole := regexFind "^[0-9]+" . -}}
{{- $frac := regexFind "\\.[0-9]+" . | trimPrefix "." -}}
{{- if or (gt (len $whole) 12) (gt (len $frac) 6) -}}
{{- fail (printf "%s: %q has more than 12 digits before or 6 after the point" $name $text) -}}
{{- end -}}
{{- $n := regexReplaceAll "^0+" $whole "" | default "0" | int64 -}}
{{- $f := regexReplaceAll "^0+" $frac "" | default "0" | int64 -}}
{{- $d := 1 -}}
{{- range until (len $frac) }}{{ $d = mul $d 10 }}{{ end -}}
{{- $unitNs := get (dict "ns" 1 "us" 1000 "µs" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000) $unit -}}
{{- if ge $unitNs 1000000000 -}}
{{- $sec = add $sec (mul $n (div $unitNs 1000000000)) -}}
{{- else -}}
{{- $ns = add $ns (mul $n $unitNs) -}}
{{- end -}}
{{- if $frac -}}
{{- if eq $unit "ns" -}}
{{- fail (printf "%s: %q: the server takes no fraction of a nanosecond" $name $text) -}}
{{- else if eq $unit "h" -}}
{{- if ne (mod (mul $f 3600) $d) 0 -}}
{{- fail (printf "%s: %q: a fraction of an hour must be whole seconds for the server" $name $text) -}}
{{- end -}}
{{- $sec = add $sec (div (mul $f 3600) $d) -}}
{{- else -}}
{{- if ne (mod (mul $f $unitNs) $d) 0 -}}
{{- fail (printf "%s: %q: the fraction must be whole nanoseconds for the server" $name $text) -}}
{{- end -}}
{{- $ns = add $ns (div (mul $f $unitNs) $d) -}}
{{- end -}}
{{- end -}}
{{- $sec = add $sec (div $ns 1000000000) -}}
{{- $ns = mod $ns 1000000000 -}}
{{- end -}}
{{- dict "s" $sec "ns" $ns | toJson }}
{{- end }}

{{/* (list "values.path" $value): as kserve-injector.duration, refusing zero (as `serve` does). */}}
{{- define "kserve-injector.nonZeroDuration" -}}
{{- $d := include "kserve-injector.duration" . | fromJson -}}
{{- if and (eq (int64 $d.s) 0) (eq (int64 $d.ns) 0) -}}
{{- fail (printf "%s: %q: must be greater than zero (serve refuses a zero value)" (index . 0) (toString (index . 1))) -}}
{{- end -}}
{{- toJson $d }}
{{- end }}

{{/* A parsed duration as a string that sorts like the duration (compare with lt). */}}
{{- define "kserve-injector.durationKey" -}}
{{- printf "%020d%09d" (int64 .s) (int64 .ns) }}
{{- end }}
