package config

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largeFile returns a limits file of n descriptors of one domain, 106 bytes
// each: 92 263 make 9.8 MB.
func largeFile(n int) []byte {
	var b strings.Builder
	b.WriteString("domain: big\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: tenant\n    value: tenant-%07d\n    rate_limit:\n      unit: minute\n      requests_per_unit: %d\n", i, 100+i%900)
	}
	return []byte(b.String())
}

// largeDescriptors is how many descriptors the large file of the tests has.
const largeDescriptors = 92_263

// peakHeap runs f and returns the most bytes of heap objects, live or
// garbage, sampled every millisecond while it ran.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	return <-done
}

// TestLargeFileMemory parses a file of 9.8 MB and 92 263 descriptors, as at
// the start, and again while the first configuration is in force, as a
// reload does: the heap stays within 12 times the file's size at the start
// and 25 times on the reload (the configuration in force, 44 MB, and the
// new one both live then). Parsed whole, the file made a YAML tree of 176
// MB, and the heap reached 36 and 41 times the file's size.
func TestLargeFileMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 20 MB of YAML")
	}
	data := largeFile(largeDescriptors)
	size := uint64(len(data))
	runtime.GC()
	var first *Config
	start := peakHeap(func() {
		var err error
		first, err = Parse([]File{{Name: "big.yaml", Data: data}}, testOptions())
		require.NoError(t, err)
	})
	require.Len(t, first.Rules(), largeDescriptors)
	runtime.GC()
	reload := peakHeap(func() {
		second, err := Parse([]File{{Name: "big.yaml", Data: data}}, testOptions())
		require.NoError(t, err)
		require.Len(t, second.Rules(), largeDescriptors)
	})
	runtime.KeepAlive(first)
	t.Logf("a file of %.1f MB: heap at most %.0f MB at the start, %.0f MB on a reload", float64(size)/1e6, float64(start)/1e6, float64(reload)/1e6)
	assert.Less(t, start, 12*size, "at the start")
	assert.Less(t, reload, 25*size, "on a reload")
}

func BenchmarkParseLargeFile(b *testing.B) {
	data := largeFile(largeDescriptors)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := Parse([]File{{Name: "big.yaml", Data: data}}, testOptions())
		if err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(c)
	}
}
