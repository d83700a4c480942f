package testenv

import (
	"net"
	"sync"
	"testing"
)

// ServeConns accepts connections on ln until the test ends, passing each to
// handle in turn and closing it after; at cleanup it closes ln and waits for
// the loop (and a handle in progress) to return.
func ServeConns(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}
