package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// MemProfileEnv names a file: when set, pgtune writes there a heap profile
// (go tool pprof) taken at the run's largest live heap, so where a large
// fleet's controller memory goes can be read from the real binary. Unset
// (the default), nothing is sampled.
const MemProfileEnv = "PGTUNE_MEMPROFILE"

// memProfileEvery is how often the live heap is looked at: often enough to
// catch a run's peak, rarely enough to cost nothing measurable.
const memProfileEvery = 100 * time.Millisecond

// startMemProfile starts sampling when MemProfileEnv is set; stop ends it
// and writes the profile one last time if the heap never grew after start.
func startMemProfile() (stop func()) {
	path := os.Getenv(MemProfileEnv)
	if path == "" {
		return func() {}
	}
	runtime.MemProfileRate = 64 << 10 // finer than the default 512 KiB: a host's share is tens of KiB
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		sampleHeap(path, done)
	}()
	return func() {
		close(done)
		<-finished
	}
}

// sampleHeap rewrites path each time the live heap after a collection
// (which the heap profile's in-use figures also describe) reaches a new
// high, until done closes.
func sampleHeap(path string, done <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	written := false
	t := time.NewTicker(memProfileEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			if !written {
				writeHeapProfile(path)
			}
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if live := sample[0].Value.Uint64(); live > peak+peak/20 {
			peak = live
			writeHeapProfile(path)
			written = true
		}
	}
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtune: %s: %v\n", MemProfileEnv, err)
	}
}
