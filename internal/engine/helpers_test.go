package engine

import (
	"net"
	"strconv"
)

func listenAll(port int) (net.Listener, error) { return net.Listen("tcp", ":"+strconv.Itoa(port)) }

func itoa(i int) string { return strconv.Itoa(i) }
