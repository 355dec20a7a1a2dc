#!/bin/sh
# Removing the package stops the controller, which restores every CPU
# class, cpuset, IRQ affinity and RPS mask it changed.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl disable --now ctrperf-isolate.service >/dev/null 2>&1 || true
fi
exit 0
