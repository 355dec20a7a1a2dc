package isolate

import (
	"strconv"

	"ctrperf/internal/kernel"
)

// IrqbalancePID returns the PID of a running irqbalance among kfs's
// processes, or 0.
func IrqbalancePID(kfs kernel.FS) int {
	pids, err := kfs.PIDs()
	if err != nil {
		return 0
	}
	for _, pid := range pids {
		if comm, err := kfs.Comm(pid); err == nil && comm == "irqbalance" {
			return pid
		}
	}
	return 0
}

// IrqbalanceAdvice says exactly how to keep irqbalance off the dedicated
// CPUs instead of fighting it every 10 s.
func IrqbalanceAdvice(pid int) string {
	return "irqbalance (pid " + strconv.Itoa(pid) + ") is running and would move the interrupts back every 10 s.\n" +
		"Either stop it while ctrperf isolate steers interrupts (systemctl stop irqbalance),\n" +
		"or let ctrperf keep only container CPUs and leave IRQs to irqbalance with --irq=false,\n" +
		"and ban the dedicated CPUs from it: set IRQBALANCE_BANNED_CPULIST=<dedicated CPUs> in\n" +
		"/etc/default/irqbalance and restart it (ctrperf isolate status shows the dedicated CPUs)."
}
