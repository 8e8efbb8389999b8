// Command testserver is the program of heartlet's test image
// (localhost:5000/testserver). The end-to-end tests drive it to exercise
// probes, lifecycle hooks, termination and API access from a pod.
//
//	testserver serve [flags]   serve HTTP, TCP and gRPC health; see -h
//	testserver fetch [flags] URL
//	                           GET URL (TLS with a CA file and a bearer token
//	                           file) and print the body; exit 1 unless 2xx
//
// The image is busybox-based, so the tests can also run shell commands in it.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testserver serve|fetch [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "fetch":
		err = fetch(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: want serve or fetch", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		os.Exit(1)
	}
}
