#!/usr/bin/env bash
# Builds the test images locally (no public registry) into the cache:
#   $HEARTLET_IMAGE_DIR/busybox   OCI layout, tag 1.35  (localhost:5000/busybox:1.35)
#   $HEARTLET_IMAGE_DIR/pause     OCI layout, tag 3.10  (localhost:5000/pause:3.10)
#   $HEARTLET_IMAGE_DIR/pause.tar docker-archive named localhost:5000/pause:3.10
#   $HEARTLET_IMAGE_DIR/testserver OCI layout, tag 1.0 (localhost:5000/testserver:1.0):
#                                 the busybox image plus /testserver
#                                 (test/images/testserver); test set only
#
# Usage: hack/images.sh [--force] [run|test]
#   run   busybox and pause: what the examples of examples/static-pods use
#   test  (the default) all of them
# Skips the build when the inputs have not changed and the cache holds the
# set asked for (the test set covers the run set); --force rebuilds.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
force=false
[[ ${1:-} == --force ]] && force=true && shift
image_set=${1:-test}
case $image_set in
run | test) ;;
*) die "usage: $(basename "$0") [--force] [run|test]" ;;
esac

busybox=/bin/busybox
# The inputs that decide the images' content.
inputs_hash() {
	{
		cat "$HEARTLET_REPO/hack/images.sh"
		cat "$HEARTLET_REPO"/test/images/pause/*.go "$HEARTLET_REPO"/test/images/testserver/*.go
		cat "$HEARTLET_REPO"/go.sum
		dpkg-query -W -f='${Package} ${Version}\n' busybox-static umoci
		go version
	} | sha256sum | cut -d' ' -f1
}
want=$(inputs_hash)
# The stamp holds the inputs' hash and the set built ("HASH test").
stamp=$HEARTLET_IMAGE_DIR/stamp
have=
[[ -f $stamp ]] && have=$(<"$stamp")
if ! $force && [[ $have == "$want test" || $have == "$want $image_set" ]]; then
	exit 0
fi

start=$(now_ms)
log "building the $image_set images into $HEARTLET_IMAGE_DIR"
parent=$(dirname "$HEARTLET_IMAGE_DIR")
mkdir -p "$parent"
work=$(mktemp -d "$parent/images.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT

if LC_ALL=C ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked; install busybox-static"
fi

# new_image LAYOUT TAG BUNDLE creates an empty image and unpacks it.
new_image() {
	umoci init --layout "$1"
	umoci new --image "$1:$2"
	umoci unpack --image "$1:$2" "$3" >/dev/null
}

# busybox: every applet as a symlink to /bin/busybox, plus root and nobody.
bb=$work/busybox
new_image "$bb" 1.35 "$work/bb-bundle"
rootfs=$work/bb-bundle/rootfs
install -d -m 0755 "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,var,proc,sys,dev,run}
install -d -m 1777 "$rootfs/tmp"
install -m 0755 "$busybox" "$rootfs/bin/busybox"
"$busybox" --list-full | while read -r applet; do
	[[ -e $rootfs/$applet || -L $rootfs/$applet ]] || ln -s /bin/busybox "$rootfs/$applet"
done
[[ -L $rootfs/bin/sh ]] || die "busybox has no sh applet"
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'nobody:x:65534:' >"$rootfs/etc/group"
umoci repack --image "$bb:1.35" "$work/bb-bundle"
umoci config --image "$bb:1.35" --os linux --architecture amd64 \
	--config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin --config.cmd sh \
	--author heartlet --history.created_by 'hack/images.sh'
umoci gc --layout "$bb"

# pause: one static Go binary.
pause=$work/pause
new_image "$pause" 3.10 "$work/pause-bundle"
(cd "$HEARTLET_REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false \
	go build -trimpath -ldflags='-s -w' -o "$work/pause-bundle/rootfs/pause" ./test/images/pause)
umoci repack --image "$pause:3.10" "$work/pause-bundle"
umoci config --image "$pause:3.10" --os linux --architecture amd64 \
	--config.entrypoint /pause --author heartlet --history.created_by 'hack/images.sh'
umoci gc --layout "$pause"
skopeo copy --quiet "oci:$pause:3.10" "docker-archive:$work/pause.tar:$HEARTLET_PAUSE_IMAGE"

# testserver: the busybox root plus one static Go binary, so the tests can
# both drive the server and run shell commands in it.
if [[ $image_set == test ]]; then
	ts=$work/testserver
	new_image "$ts" 1.0 "$work/ts-bundle"
	cp -a "$rootfs/." "$work/ts-bundle/rootfs/"
	(cd "$HEARTLET_REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false \
		go build -trimpath -ldflags='-s -w' -o "$work/ts-bundle/rootfs/testserver" ./test/images/testserver)
	umoci repack --image "$ts:1.0" "$work/ts-bundle"
	umoci config --image "$ts:1.0" --os linux --architecture amd64 \
		--config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin --config.cmd /testserver --config.cmd serve \
		--author heartlet --history.created_by 'hack/images.sh'
	umoci gc --layout "$ts"
fi

rm -rf "$work/bb-bundle" "$work/pause-bundle" "$work/ts-bundle"
printf '%s %s\n' "$want" "$image_set" >"$work/stamp"
rm -rf "$HEARTLET_IMAGE_DIR"
mv "$work" "$HEARTLET_IMAGE_DIR"
trap - EXIT
log "$image_set images built in $(elapsed "$start")"
