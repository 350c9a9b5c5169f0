//go:build nodev

package main

import (
	"fmt"
	"os"
)

// devCommand is what the image's build answers to `paddock dev`: it has no dev environment
// (none of internal/devcluster, envtest or kustomize is linked), and says how to get one.
var devCommand = command{"dev", "not in this build (the image's, tag nodev): `make dev` builds a paddock with it", noDev}

// noDevMessage is what `paddock dev` prints in a build without the dev environment.
const noDevMessage = `paddock dev: this paddock binary has no dev environment: it was built with the tag nodev
(the container image's build, also 'make build'), which carries only the manager and the broker.
Build one with it from a paddock checkout and run that:
    make dev                  (builds bin/paddock with the dev environment and runs 'paddock dev')
    go build -o bin/paddock . (a plain build has it too; then bin/paddock dev)`

func noDev([]string) int {
	fmt.Fprintln(os.Stderr, noDevMessage)
	return 1
}
