//go:build !linux

package tcp_test

import (
	"net"
	"testing"
)

// listenBacklog: a listener with a small accept queue needs the socket
// calls of backlog_linux_test.go; elsewhere the test that uses it is
// skipped.
func listenBacklog(t *testing.T, backlog int) net.Listener {
	t.Skip("a listener with a chosen backlog is set up on Linux only")
	return nil
}
