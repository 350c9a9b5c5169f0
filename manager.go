package main

import (
	"flag"
	"fmt"
	"os"
)

// runManager runs the operator. Not implemented yet: it lands with the provisioning issue.
func runManager(args []string) int {
	fs := flag.NewFlagSet("paddock manager", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: paddock manager [flags]\n\nNot implemented yet: the operator lands with the KafkaCluster provisioning issue.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fmt.Fprintln(os.Stderr, "paddock manager: not implemented yet")
	return 2
}
