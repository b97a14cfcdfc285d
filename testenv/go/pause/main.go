// Command pause is the pod sandbox's process of testenv's real node: it holds the pod's
// namespaces, reaps any child re-parented to it (it is PID 1 of the pod), and exits 0 on
// SIGTERM or SIGINT. Built statically (CGO_ENABLED=0) so its image needs no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
