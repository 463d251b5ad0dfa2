package mcptest

import (
	"net"
	"os"
	"testing"
)

// ListensOn sees this process's own listener, and not a port it closed or another
// process's.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if !ListensOn(os.Getpid(), port) {
		t.Errorf("our listener on port %d is not seen", port)
	}
	if ListensOn(os.Getppid(), port) {
		t.Errorf("the parent process is said to listen on our port %d", port)
	}
	l.Close()
	if ListensOn(os.Getpid(), port) {
		t.Errorf("port %d is still seen after its listener closed", port)
	}
}
