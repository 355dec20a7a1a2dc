package isolate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IrqbalancePID returns the PID of a running irqbalance under procRoot, or 0.
func IrqbalancePID(procRoot string) int {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == "irqbalance" {
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
