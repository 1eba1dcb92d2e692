package proc

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// clusterBusOffset is the distance from a cluster node's port to its cluster
// bus port.
const clusterBusOffset = 10000

// maxClusterPort is the highest port a cluster node may use, so that its bus
// port is a valid port too.
const maxClusterPort = 55000

// reserved holds the ports handed out to servers of this test binary, so that
// servers started in parallel never pick the same port.
var reserved = struct {
	sync.Mutex
	ports map[int]bool // every reserved port, bus ports included
	bus   map[int]int  // a cluster node's port -> its bus port
}{ports: make(map[int]bool), bus: make(map[int]int)}

// reservePorts picks n free loopback ports by letting the kernel choose them.
// For a cluster node the port is at most maxClusterPort and its bus port is
// free too. A port can still be taken between this check and the server's
// start; startServer then tries again.
func reservePorts(n int, cluster bool) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			releaseLocked(ports...)
			return nil, errors.New("proc: found no free loopback port")
		}
		port, err := kernelPort()
		if err != nil {
			releaseLocked(ports...)
			return nil, err
		}
		if reserved.ports[port] {
			continue
		}
		if cluster {
			bus := port + clusterBusOffset
			if port > maxClusterPort || reserved.ports[bus] || !portFree(bus) {
				continue
			}
			reserved.ports[bus] = true
			reserved.bus[port] = bus
		}
		reserved.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// releasePorts gives back ports (and their bus ports) that reservePorts
// handed out. Zero ports are ignored.
func releasePorts(ports ...int) {
	reserved.Lock()
	defer reserved.Unlock()
	releaseLocked(ports...)
}

func releaseLocked(ports ...int) {
	for _, p := range ports {
		delete(reserved.ports, p)
		if bus, ok := reserved.bus[p]; ok {
			delete(reserved.ports, bus)
			delete(reserved.bus, p)
		}
	}
}

// kernelPort listens on 127.0.0.1:0, closes, and returns the port it got.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("proc: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether 127.0.0.1:port can be listened on.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// FreePorts picks n free loopback ports for a server that cannot listen on
// port 0 and name what it bound, such as another rate limit service run
// beside ratewarden in a benchmark. Give them back with ReleasePorts once it
// listens; until then another process may still take one.
func FreePorts(n int) ([]int, error) { return reservePorts(n, false) }

// ReleasePorts gives back ports that FreePorts picked.
func ReleasePorts(ports ...int) { releasePorts(ports...) }
