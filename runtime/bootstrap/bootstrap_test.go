package bootstrap

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// share runs ranks of one world as goroutines (ranks lists those that
// start) and returns what each got and its error.
func share(t *testing.T, size int, ranks []int, timeout time.Duration) ([][]byte, []error) {
	addr := freeAddr(t)
	got, errs := make([][]byte, size), make([]error, size)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], errs[r] = Share(Env{Rank: r, Size: size, Addr: addr}, []byte(fmt.Sprintf("id of rank %d", r)), timeout)
		}()
	}
	wg.Wait()
	return got, errs
}

// TestShare: every rank gets rank 0's value, whichever starts first.
func TestShare(t *testing.T) {
	got, errs := share(t, 4, []int{3, 1, 2, 0}, 10*time.Second)
	for r := range 4 {
		if errs[r] != nil || string(got[r]) != "id of rank 0" {
			t.Errorf("rank %d: %q, %v", r, got[r], errs[r])
		}
	}
}

// TestShareMissingRank: without rank 0 the others fail by the timeout,
// naming the address; without rank 2, rank 0 says how many it served.
func TestShareMissingRank(t *testing.T) {
	_, errs := share(t, 3, []int{1, 2}, 300*time.Millisecond)
	for _, r := range []int{1, 2} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "rank 0 does not answer on 127.0.0.1:") {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
	_, errs = share(t, 3, []int{0, 1}, 300*time.Millisecond)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 0 served 1 of the 2 other ranks") {
		t.Errorf("rank 0: %v", errs[0])
	}
}

// TestFromEnv reads torchrun's variables and refuses bad ones; rank 0
// serves on the port after MASTER_PORT, which torchrun's store holds.
func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		rank, size, addr, port string
		ok                     bool
		want                   string
	}{
		{"", "", "", "", false, ""},
		{"1", "4", "10.0.0.1", "29500", true, ""},
		{"4", "4", "h", "1", true, "$RANK 4 of $WORLD_SIZE 4"},
		{"x", "4", "h", "1", true, `$RANK is "x"`},
		{"1", "4", "", "", true, `$MASTER_ADDR "" must name`},
		{"1", "4", "h", "0", true, "1 to 65534"},
		{"1", "4", "h", "65535", true, "1 to 65534"},
	} {
		t.Setenv("RANK", c.rank)
		t.Setenv("WORLD_SIZE", c.size)
		t.Setenv("MASTER_ADDR", c.addr)
		t.Setenv("MASTER_PORT", c.port)
		t.Setenv("TOFUC_BOOTSTRAP_PORT", "")
		env, ok, err := FromEnv()
		switch {
		case ok != c.ok:
			t.Errorf("%+v: ok %v", c, ok)
		case c.want == "" && err != nil, c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		case c.want == "" && ok && (env.Rank != 1 || env.Size != 4 || env.Addr != "10.0.0.1:29501"):
			t.Errorf("%+v: %+v", c, env)
		}
	}
}

// TestShareBesideIdleConnection: a connection to rank 0 that says
// nothing does not hold the rank that comes after it.
func TestShareBesideIdleConnection(t *testing.T) {
	addr := freeAddr(t)
	served := make(chan error, 1)
	go func() {
		_, err := Share(Env{Rank: 0, Size: 2, Addr: addr}, []byte("id"), 5*time.Second)
		served <- err
	}()
	var idle net.Conn
	for err := error(nil); idle == nil; time.Sleep(10 * time.Millisecond) {
		if idle, err = net.Dial("tcp", addr); err != nil {
			idle = nil
		}
	}
	defer idle.Close()
	start := time.Now()
	got, err := Share(Env{Rank: 1, Size: 2, Addr: addr}, nil, 5*time.Second)
	if err != nil || string(got) != "id" || time.Since(start) > 2*time.Second {
		t.Errorf("rank 1 beside an idle connection: %q, %v after %s", got, err, time.Since(start))
	}
	if err := <-served; err != nil {
		t.Errorf("rank 0: %v", err)
	}
}
