#!/usr/bin/env bash
# The README's test command on a fresh Debian 12, as a new machine would run it.
#
#   sudo bench/fresh_debian.sh [DIR] [-- CMD...]     (default CMD: python3 dev.py test)
#
# DIR (default /var/tmp/arrowgate-fresh) gets a minimal Debian 12 made by debootstrap
# (minbase with python3, git and ca-certificates: no pip, no venv module, no compiler, no
# Python headers), kept as DIR.tgz and unpacked anew for each run, with this machine's CA
# certificates and apt sources (the registries may be reached through a proxy that signs
# with its own CA). A clone of this repository's HEAD runs CMD inside it, as root, with
# the PIP_* variables this machine sets; its output, with the time of each of dev.py's
# steps and the load before and after, goes to DIR.log. Needs root, debootstrap (apt-get
# install debootstrap) and about 5 GB. Not a test: it downloads everything a fresh machine
# does (about 1 GB of Debian packages and wheels).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/var/tmp/arrowgate-fresh}
[ "${1:-}" != "" ] && shift
[ "${1:-}" = "--" ] && shift
CMD=${*:-python3 dev.py test}
LOG=$DIR.log

unmount() { if mount | grep -q " $DIR/"; then umount -R "$DIR/dev" || true; umount -R "$DIR/sys" || true; umount "$DIR/proc" || true; fi; }
trap unmount EXIT
unmount
if [ ! -f "$DIR.tgz" ]; then
    rm -rf "$DIR"
    debootstrap --variant=minbase --include=python3,git,ca-certificates bookworm "$DIR" \
        http://deb.debian.org/debian
    rm -f "$DIR/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/debian.sources "$DIR/etc/apt/sources.list.d/" 2>/dev/null \
        || cp /etc/apt/sources.list "$DIR/etc/apt/"
    tar -C "$(dirname "$DIR")" -czf "$DIR.tgz" "$(basename "$DIR")"
fi
rm -rf "$DIR" && tar -C "$(dirname "$DIR")" -xzf "$DIR.tgz"
cp /etc/resolv.conf "$DIR/etc/"
if [ -d /usr/local/share/ca-certificates ]; then
    mkdir -p "$DIR/usr/local/share/ca-certificates"
    cp -r /usr/local/share/ca-certificates/. "$DIR/usr/local/share/ca-certificates/"
fi
cp /etc/ssl/certs/ca-certificates.crt "$DIR/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$DIR/proc" "$DIR/sys" "$DIR/dev"
mount -t proc proc "$DIR/proc" && mount --rbind /sys "$DIR/sys" && mount --rbind /dev "$DIR/dev"
git clone -q "$ROOT" "$DIR/root/arrowgate"
echo "load before: $(cat /proc/loadavg)" > "$LOG"
chroot "$DIR" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root CI=true LANG=C.UTF-8 TERM=dumb \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DEFAULT_TIMEOUT=180 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    bash -c "cd /root/arrowgate && git log --oneline -1 && date -u && time $CMD; echo rc=\$?; date -u" \
    >> "$LOG" 2>&1 || true
echo "load after: $(cat /proc/loadavg)" >> "$LOG"
tail -n 6 "$LOG"
