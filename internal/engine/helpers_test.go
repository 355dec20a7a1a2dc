package engine

import (
	"net"
	"os"
	"strconv"
	"syscall"
)

func listenAll(port int) (net.Listener, error) { return net.Listen("tcp", ":"+strconv.Itoa(port)) }

func itoa(i int) string { return strconv.Itoa(i) }

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }

func removeAll(p string) error { return os.RemoveAll(p) }
