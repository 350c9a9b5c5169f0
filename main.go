// Command paddock is one binary with three roles, so one image serves them all:
//
//	paddock manager   the operator: provisions KafkaClusters and keeps the broker registry
//	paddock broker    one Kafka-wire-compatible broker (run by the StatefulSet)
//	paddock dev       a whole paddock system on this machine, without Docker
//	paddock groups    consumer groups, their offsets, lag and members (kafka-consumer-groups.sh)
//	paddock storage   `storage check`: certify a shared volume from two nodes
//	paddock version   what this binary is: version, commit, Go version, flavour
//
// The image's binary is built with the tag nodev (`make build`, the Dockerfile): it carries
// only what runs in a cluster, and its `paddock dev` says how to get one that has the dev
// environment (`make dev`, or a plain `go build`). dev.go and nodev.go are the two flavours.
//
// Run `paddock <command> --help` for a command's flags.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/internal/buildinfo"
	"github.com/paddock-dev/paddock/internal/storagecheck"
)

// command is one subcommand: run gets the arguments after its name and returns the exit code.
type command struct {
	name, summary string
	run           func(args []string) int
}

var commands = []command{
	{"manager", "run the operator (controller-runtime manager with leader election)", runManager},
	{"broker", "run one broker: the Kafka wire server, heartbeat and drain", broker.Main},
	devCommand, // dev.go, or nodev.go in the image's build
	groupsCommand,
	{"storage", "storage check: certify a shared volume from two nodes (exclusive create, rename, fsync, visibility)", storagecheck.Main},
	{"version", "print this binary's version, commit, Go version and flavour", runVersion},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(stderr, "paddock: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "paddock — a Kubernetes operator with an embedded Kafka-compatible broker.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: paddock <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'paddock <command> --help' for a command's flags.")
}

// runVersion is `paddock version`: the build facts of internal/buildinfo, one per line.
func runVersion(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "paddock version: takes no arguments, got %q\n", args)
		return 2
	}
	fmt.Print(buildinfo.Get())
	return 0
}
