package tcp_test

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// listenBacklog returns a loopback listener whose accept queue holds about
// backlog connections (net.Listen always asks for the system's maximum).
func listenBacklog(t *testing.T, backlog int) net.Listener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "backlog-listener")
	defer f.Close() // FileListener dups the descriptor
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
