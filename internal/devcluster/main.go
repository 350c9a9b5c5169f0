package devcluster

import (
	"flag"
	"fmt"
	"os"
)

// Main runs `paddock dev` with args and returns the process exit code.
// Not implemented yet: it lands with the paddock dev issue.
func Main(args []string) int {
	fs := flag.NewFlagSet("paddock dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: paddock dev [flags]\n\nNot implemented yet: the dev environment lands with the paddock dev issue.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fmt.Fprintln(os.Stderr, "paddock dev: not implemented yet")
	return 2
}
