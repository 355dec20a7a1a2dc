#!/bin/sh
# The ctrperf-isolate unit is installed, not enabled: it changes CPU and
# IRQ placement, which is the administrator's call
# (systemctl enable --now ctrperf-isolate).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	# An upgrade restarts a controller that was running (it restores
	# everything on stop and starts afresh with the new binary).
	if [ "$1" = configure ] && [ -n "$2" ] && systemctl is-active --quiet ctrperf-isolate.service; then
		systemctl restart ctrperf-isolate.service || true
	fi
fi
exit 0
